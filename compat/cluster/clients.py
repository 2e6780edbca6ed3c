"""Stock clients across a leader kill on a 3-node cluster of real processes (scripts/cluster): for each of
librdkafka (confluent-kafka), the Java client (kafka-clients, the matrix's jars) and franz-go, an acks=all
idempotent producer writes RECORDS records (the id in the value) to a 3-partition RF 3 topic with
min.insync.replicas=2, paced so that the harness can kill -9 the leader of partition 0 once 30 % are
acknowledged, wait for a new leader, and restart the killed node while the producer is still writing.
Then a reader of the same client reads every partition from the start up to its high watermark.

Checks per client: every record acknowledged (none failed after the delivery timeout); every acknowledged
id read back, at the partition and offset its acknowledgement named; every partition read in offset
order without gaps; no id read twice (the idempotent producer's retries across the failover are
deduplicated by the new leader). The longest pause between two acknowledgements (the producer's
unavailability window around the kill) and the duplicate count are printed either way.

The three client programs live in compat/cluster/clients/ (JavaClients.java, confluent_clients.py) and
compat/go/clients (franz-go); they share one line protocol (see their headers).

Env: SLUICE_BIN, CLUSTER_SCRIPT (scripts/cluster), CRASH_DIR (work dir), CLUSTER_KIND (sluice|kafka),
KAFKA_LIBS (the Java client's jars), GO_CLIENTS_BIN (the franz-go program), TOPIC_PREFIX; CLIENTS_RECORDS
(default 100000), CLIENTS_RATE (records/s, default 5000), CLIENTS (comma list, default all three).
Runs with compat/python/.venv.
"""
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
from compat_common import Checks, env, print_client_version  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402
from failover import Cluster, admin, leaders, wait_for  # noqa: E402

PARTITIONS = 3
KILL_AT = 0.3  # fraction of the records acknowledged before the leader is killed


def client_cmd(name):
    if name == "confluent":
        return [sys.executable, os.path.join(HERE, "clients", "confluent_clients.py")]
    if name == "java":
        return ["java", "-Xmx512m", "-cp", f"{env('KAFKA_LIBS')}/*", os.path.join(HERE, "clients", "JavaClients.java")]
    if name == "franz-go":
        return [env("GO_CLIENTS_BIN")]
    raise ValueError(name)


class Producer:
    """The producer subprocess and what its stdout said so far (a reader thread parses it)."""

    def __init__(self, cmd, workdir, name):
        self.acked = {}  # id -> (partition, offset)
        self.failed = []  # (id, error)
        self.done = None
        self.ack_times = []  # monotonic time of every acknowledgement line, in arrival order
        self.stderr_path = os.path.join(workdir, f"{name}-producer.err")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(self.stderr_path, "w"), text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            f = line.split()
            if not f:
                continue
            if f[0] == "A" and len(f) == 4:
                self.acked[int(f[1])] = (int(f[2]), int(f[3]))
                self.ack_times.append(time.monotonic())
            elif f[0] == "E":
                self.failed.append((int(f[1]), " ".join(f[2:])))
            elif f[0] == "DONE":
                self.done = line.strip()

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.thread.join(timeout=10)
        return self.proc.returncode

    def stderr_tail(self):
        with open(self.stderr_path) as f:
            return f.read()[-600:].strip()


def read_back(cmd, workdir, name):
    """Runs the reader: (rc, [(partition, offset, id)], stderr tail)."""
    err_path = os.path.join(workdir, f"{name}-consumer.err")
    with open(err_path, "w") as err:
        try:
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=180)
            rc, text = out.returncode, out.stdout
        except subprocess.TimeoutExpired as e:
            rc, text = -9, (e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
    records = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] == "R":
            records.append((int(f[1]), int(f[2]), int(f[3])))
    with open(err_path) as f:
        return rc, records, f.read()[-600:].strip()


def verify(checks, name, records, prod, read):
    """The checks on what was acknowledged and what was read; returns the duplicate count."""
    checks.check(f"{name}: every record acknowledged", len(prod.acked) == records and not prod.failed,
                 f"{len(prod.acked)} of {records} acknowledged, {len(prod.failed)} failed"
                 + (f", first failure {prod.failed[0]}" if prod.failed else ""))
    at = {}  # (partition, offset) -> id
    seen = {}
    order_bad = []
    last = {}
    for p, o, i in read:
        if p in last and o != last[p] + 1:
            order_bad.append((p, last[p], o))
        last[p] = o
        at[(p, o)] = i
        seen[i] = seen.get(i, 0) + 1
    missing = [i for i in prod.acked if i not in seen]
    moved = [(i, po) for i, po in prod.acked.items() if i in seen and at.get(po) != i]
    where = {}  # id -> where it was read, for the first few moved ids only
    for (p, o), i in at.items():
        if any(i == m for m, _ in moved[:3]):
            where.setdefault(i, []).append((p, o))
    dups = sum(n - 1 for n in seen.values() if n > 1)
    firsts = {p: min(o for q, o, _ in read if q == p) for p in last} if read else {}
    checks.check(f"{name}: every acknowledged id read back", not missing,
                 f"{len(prod.acked)} acknowledged, {len(seen)} distinct ids read"
                 + (f", missing {len(missing)} (first {sorted(missing)[:10]})" if missing else ""))
    checks.check(f"{name}: every acknowledged id at the offset its acknowledgement named", not moved,
                 f"{len(moved)} elsewhere (first, acknowledged -> read: {[(i, po, where.get(i)) for i, po in moved[:3]]})" if moved else "all at their offsets")
    checks.check(f"{name}: every partition read in offset order from offset 0, without gaps",
                 not order_bad and all(o == 0 for o in firsts.values()),
                 f"{len(read)} records over partitions {sorted(last)}"
                 + (f"; out of order {order_bad[:5]}" if order_bad else "")
                 + (f"; first offsets {firsts}" if any(firsts.values()) else ""))
    print(f"{name}: duplicates read {dups} (ids read more than once: {sum(1 for n in seen.values() if n > 1)})")
    checks.check(f"{name}: no duplicates (idempotent producer)", dups == 0, f"{dups} duplicate records")
    return dups


def run_client(checks, cluster, a, prefix, name, records, rate, workdir):
    topic = f"{prefix}-clients-{name}"
    fut = a.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                          request_timeout=10)
    fut[topic].result(timeout=20)
    before = wait_for(f"{topic} leaders", lambda: (lambda m: len(m) == PARTITIONS and all(
        l > 0 and len(isr) == 3 for l, _, isr in m.values()) and m)(leaders(a, topic)), 20)
    victim = before[0][0]
    print(f"{name}: topic {topic} leaders {({p: l for p, (l, _, _) in before.items()})}; "
          f"producing {records} records at {rate}/s, killing node {victim} (leader of partition 0) "
          f"at {int(KILL_AT * 100)} %")
    t_start = time.monotonic()
    prod = Producer(client_cmd(name) + ["produce", cluster.bootstrap, topic, str(records), str(rate)], workdir, name)
    killed = False
    try:
        wait_for(f"{name}: {int(KILL_AT * 100)} % acknowledged",
                 lambda: len(prod.acked) >= records * KILL_AT or prod.proc.poll() is not None, 120)
        killed = prod.proc.poll() is None
        checks.check(f"{name}: the leader is killed while the producer writes", killed,
                     f"{len(prod.acked)} acknowledged at the kill")
        t_kill = time.monotonic()
        cluster.run("kill", "--node", str(victim), "--signal", "KILL")
        survivors = ",".join(cluster.addr(n) for n in (1, 2, 3) if n != victim)
        live = admin(survivors)
        after = wait_for("a new leader for partition 0",
                         lambda: (lambda m: m[0][0] not in (victim, -1) and m)(leaders(live, topic)), 30)
        print(f"{name}: new leaders {({p: l for p, (l, _, _) in after.items()})} "
              f"{time.monotonic() - t_kill:.1f} s after the kill")
        time.sleep(1)
        cluster.run("restart", "--node", str(victim))
        print(f"{name}: node {victim} restarted {time.monotonic() - t_kill:.1f} s after the kill, "
              f"{len(prod.acked)} acknowledged")
    except Exception as e:  # noqa: BLE001 - a failed fault step is a failed check, the run goes on
        checks.check(f"{name}: the leader kill and restart", False, f"{type(e).__name__}: {e}")
    rc = prod.wait(timeout=200)
    took = time.monotonic() - t_start
    gaps = [b - t for t, b in zip(prod.ack_times, prod.ack_times[1:])]
    print(f"{name}: producer exit {rc} after {took:.1f} s: {prod.done}; longest pause between two "
          f"acknowledgements {max(gaps, default=0) * 1000:.0f} ms")
    checks.check(f"{name}: the producer finishes", rc == 0 and prod.done is not None,
                 f"exit {rc}, {prod.done}" + ("" if rc == 0 else f": {prod.stderr_tail()}"))
    # The restarted replica back in every ISR before reading (and before the next client's topic).
    try:
        wait_for("the restarted node back in the ISR", lambda: all(
            victim in isr for _, _, isr in leaders(a, topic).values()), 60)
    except Exception as e:  # noqa: BLE001
        print(f"{name}: {e}")
    rc, read, err = read_back(client_cmd(name) + ["consume", cluster.bootstrap, topic], workdir, name)
    checks.check(f"{name}: the reader reaches every high watermark", rc == 0,
                 f"exit {rc}, {len(read)} records" + ("" if rc == 0 else f": {err}"))
    verify(checks, name, records, prod, read)


def main():
    checks = Checks()
    print_client_version()
    prefix = env("TOPIC_PREFIX", f"clients-{int(time.time())}")
    workdir = env("CRASH_DIR", "/tmp/sluice-clients")
    os.makedirs(workdir, exist_ok=True)
    records = int(env("CLIENTS_RECORDS", "100000"))
    rate = int(env("CLIENTS_RATE", "5000"))
    names = env("CLIENTS", "confluent,java,franz-go").split(",")
    shutil.rmtree(os.path.join(workdir, "cluster"), ignore_errors=True)  # a fresh cluster (its own CLUSTER_ID)
    cluster = Cluster(workdir)
    try:
        bootstrap = cluster.start()
        print(f"cluster up ({env('CLUSTER_KIND', 'sluice')}): {bootstrap}")
        a = admin(bootstrap)
        for name in names:
            try:
                run_client(checks, cluster, a, prefix, name, records, rate, workdir)
            except Exception as e:  # noqa: BLE001
                checks.check(f"{name}: the run", False, f"{type(e).__name__}: {e}")
    finally:
        try:
            cluster.run("stop")
        except Exception as e:  # noqa: BLE001
            print(f"stop: {e}")
    checks.finish()


if __name__ == "__main__":
    main()
