"""No acknowledged record lost (issue 17): a 3-node cluster (scripts/cluster) under Kafka's
VerifiableProducer (acks=all, enable.idempotence=true, bounded count and throughput, keys spread
over every partition) and VerifiableConsumer (its own group), while a seeded fault schedule runs:

- kill -9 the leader of partition p (partitions in turn; with --include-controller the first kill and
  every third one take the quorum leader's node instead), hold, restart it;
- pause (SIGSTOP) one node, hold, resume;
- isolate one node (scripts/cluster isolate: every link to the other nodes cut), hold, heal;
- with --slow-disk-ms MS (scripts/durability: 100), one more fault at a seeded place: the disk of the
  leader of a partition slowed (scripts/cluster slow-disk: its block I/O throttled to 1000/MS operations
  per second), hold, fast-disk. The other faults of a seed stay what they were without it.

After each undo the run waits for every partition's ISR to be whole again before the next fault.
The schedule (kinds, partitions, nodes, hold times) comes from --seed alone and is printed first; the
node a "kill the leader of p" hits is whoever leads p then. At the end:

- every acknowledged record (VerifiableProducer's producer_send_success) was consumed by the
  VerifiableConsumer: 0 missing; duplicates (consumed more than once) counted and reported;
- every replica of every partition (each node's log dir, read offline with Kafka's DumpLogSegments
  after a clean stop: Sluice writes Kafka's format too) holds offsets 0..N-1 in order, the same records
  as the other replicas, and every acknowledged record at the offset its acknowledgement gave;
- per fault, the unavailability window: the longest stall in acknowledgements of any partition from
  the fault until the ISR was whole again (last ack before the stall to the first after it; the
  idempotent producer retries internally, so a failed attempt shows as a stall, and a
  producer_send_error, if any, is counted), printed in a summary table.

Usage: durability.py [--broker sluice|kafka] [--seed S] [--faults N] [--records N] [--throughput T]
                     [--include-controller] [--hold-s MIN,MAX] [--slow-disk-ms MS]
The short scripts/compat unit (cluster/durability) runs a few faults; scripts/durability the long run.
Env: SLUICE_BIN, CLUSTER_SCRIPT (scripts/cluster), CRASH_DIR (work dir), KAFKA_LIBS (Kafka's jars),
CLUSTER_KIND (default broker), TOPIC_PREFIX. Runs with compat/python/.venv (confluent-kafka for metadata).
"""
import argparse
import glob
import json
import os
import random
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
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from failover import quorum_status, wait_for  # noqa: E402

PARTITIONS = 6
NODES = 3
# Fast failure detection, as cluster/failover uses, and a short replica lag so the ISR moves within a fault.
CLUSTER_SETS = ["controller.quorum.election.timeout.ms=1000", "controller.quorum.fetch.timeout.ms=2000",
                "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
                "replica.lag.time.max.ms=5000"]


def log(msg):
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} {msg}", flush=True)


class Cluster:
    def __init__(self, workdir, kind):
        self.script = env("CLUSTER_SCRIPT", os.path.join(HERE, "..", "..", "scripts", "cluster"))
        self.dir = os.path.join(workdir, "cluster")
        self.kind = kind
        self.bootstrap = None

    def run(self, *args, timeout=180):
        out = subprocess.run([self.script, *args, "--dir", self.dir], capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"scripts/cluster {' '.join(args)}: {out.stderr.strip()[-800:]}")
        for line in out.stdout.splitlines():
            if re.match(r"^\d{4}-\d\d-\d\dT", line):
                print(f"  fault log: {line}", flush=True)
        return out.stdout.strip()

    def start(self):
        args = ["start", "--nodes", str(NODES)] + (["--kafka"] if self.kind == "kafka" else [])
        for s in CLUSTER_SETS:
            args += ["--set", s]
        self.bootstrap = self.run(*args).splitlines()[-1]
        return self.bootstrap

    def node_dir(self, n):
        return os.path.join(self.dir, f"node-{n}")


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                        "reconnect.backoff.max.ms": 200, "log_level": 2})


def partitions(a, topic, timeout=4, count=PARTITIONS):
    """{p: (leader, replicas, isr)} from a Metadata request."""
    md = a.list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != count:
        raise RuntimeError(f"metadata for {topic}: {None if t is None else t.error}")
    return {p: (pm.leader, list(pm.replicas), sorted(pm.isrs)) for p, pm in t.partitions.items()}




class JavaTool:
    """A Kafka tool JVM whose JSON event lines go to on_event (with the local receive time)."""

    def __init__(self, name, args, workdir, on_event):
        libs = env("KAFKA_LIBS")
        self.name = name
        self.err = open(os.path.join(workdir, f"{name}.stderr"), "w")
        self.proc = subprocess.Popen(["java", "-Xmx384m", "-Dlog4j2.level=warn", "-cp", f"{libs}/*", *args],
                                     stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._read, args=(on_event,), daemon=True)
        self.thread.start()

    def _read(self, on_event):
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    on_event(json.loads(line))
                except ValueError:
                    pass

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # shutdown hook: close() completes what is in flight
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.thread.join(10)


def schedule(seed, n_faults, include_controller, hold, slow_disk_ms=0):
    """The fault plan from the seed alone: kinds in shuffled rounds of three, each kind at least once."""
    rng = random.Random(seed)
    plan, kills, led = [], 0, 0  # kills so far; kills of a partition's leader so far (partitions in turn)
    while len(plan) < n_faults:
        kinds = ["kill", "pause", "isolate"]
        rng.shuffle(kinds)
        for kind in kinds:
            if len(plan) == n_faults:
                break
            f = {"kind": kind, "hold_s": round(rng.uniform(*hold), 1)}
            if kind == "kill":
                if include_controller and kills % 3 == 0:
                    f["target"] = "controller"
                else:
                    f["target"] = f"leader of partition {led % PARTITIONS}"
                    f["partition"] = led % PARTITIONS
                    led += 1
                kills += 1
            else:
                f["node"] = rng.randint(1, NODES)
            plan.append(f)
    if slow_disk_ms:  # its own generator: the seed's other faults are the same with or without it
        extra = random.Random(seed * 7919 + 1)
        p = extra.randrange(PARTITIONS)
        plan.insert(extra.randint(0, len(plan)), {
            "kind": "slow-disk", "hold_s": round(extra.uniform(*hold), 1), "delay_ms": slow_disk_ms,
            "target": f"leader of partition {p} (disk {slow_disk_ms} ms per operation)", "partition": p})
    return plan


def stall(acks_by_partition, start, end):
    """The longest gap between consecutive acknowledgements of one partition that ends after `start`
    and begins before `end` (seconds, partition)."""
    best, best_p = 0.0, None
    for p, times in acks_by_partition.items():
        prev = None
        for t in times:
            if prev is not None and t > start and prev < end and t - prev > best:
                best, best_p = t - prev, p
            if t > end:
                break
            prev = t
    return best, best_p


def dump_node(node_dir, topic, libs):
    """{partition: [(offset, value)]} of one node's replicas, read with one DumpLogSegments run."""
    segs = sorted(glob.glob(os.path.join(node_dir, "data", f"{topic}-*", "*.log")))
    if not segs:
        raise RuntimeError(f"no segments of {topic} in {node_dir}/data")
    # kafka.tools.DumpLogSegments up to Kafka 4.1, org.apache.kafka.tools.DumpLogSegments from 4.4
    cls = "kafka.tools.DumpLogSegments" if glob.glob(os.path.join(libs, "kafka_2.13-4.[0-3].*.jar")) \
        else "org.apache.kafka.tools.DumpLogSegments"
    out = subprocess.run(["java", "-Xmx384m", "-cp", f"{libs}/*", cls,
                          "--deep-iteration", "--print-data-log", "--files", ",".join(segs)],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"DumpLogSegments exit {out.returncode}: {out.stderr.strip()[-300:]}")
    recs, current = {}, None
    for line in out.stdout.splitlines():
        if line.startswith("Dumping "):
            current = int(os.path.basename(os.path.dirname(line[len("Dumping "):].strip())).rsplit("-", 1)[1])
            recs.setdefault(current, [])
            continue
        m = re.search(r"\| offset: (\d+) .* payload: (.*)$", line)
        if m and current is not None:
            recs[current].append((int(m.group(1)), m.group(2)))
    return recs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--broker", choices=["sluice", "kafka"], default=env("CLUSTER_KIND", "sluice"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--faults", type=int, default=int(env("DURABILITY_FAULTS", "3")))
    ap.add_argument("--records", type=int, default=None, help="VerifiableProducer --max-messages")
    ap.add_argument("--throughput", type=int, default=int(env("DURABILITY_THROUGHPUT", "300")))
    ap.add_argument("--include-controller", action="store_true",
                    default=env("DURABILITY_INCLUDE_CONTROLLER") == "1")
    ap.add_argument("--hold-s", default=env("DURABILITY_HOLD_S", "4,8"))
    ap.add_argument("--slow-disk-ms", type=int, default=int(env("DURABILITY_SLOW_DISK_MS", "0")),
                    help="add one slow-disk fault (scripts/cluster slow-disk) with this delay; 0: none")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(env("DURABILITY_SEED", str(int(time.time()) % 100000)))
    hold = tuple(float(x) for x in args.hold_s.split(","))
    # Enough records for the whole schedule (about 40 s per fault on a loaded machine); stopped early otherwise.
    records = args.records or args.throughput * (30 + 45 * (args.faults + (1 if args.slow_disk_ms else 0)))
    checks = Checks()
    libs = env("KAFKA_LIBS")
    ver = next((f[len("kafka-tools-"):-4] for f in sorted(os.listdir(libs)) if f.startswith("kafka-tools-")
                and f.endswith(".jar") and "api" not in f), "?")
    print(f"CLIENT_VERSION: kafka-tools {ver} (VerifiableProducer, VerifiableConsumer, DumpLogSegments)", flush=True)
    plan = schedule(seed, args.faults, args.include_controller, hold, args.slow_disk_ms)
    print(f"seed {seed} (replay: --seed {seed} --faults {args.faults}"
          f"{' --include-controller' if args.include_controller else ''} --hold-s {args.hold_s}"
          f"{f' --slow-disk-ms {args.slow_disk_ms}' if args.slow_disk_ms else ''}); "
          f"broker {args.broker}; {records} records at {args.throughput}/s", flush=True)
    for i, f in enumerate(plan):
        what = f.get("target") or f"node {f['node']}"
        print(f"  plan {i + 1:2}: {f['kind']:7} {what} for {f['hold_s']} s", flush=True)
    # scripts/compat's timeout sends SIGTERM: unwind through the finally below, which stops the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = env("CRASH_DIR", f"/tmp/sluice-durability-{os.getpid()}")
    os.makedirs(workdir, exist_ok=True)
    cluster = Cluster(workdir, args.broker)
    try:
        run(checks, cluster, plan, records, args.throughput, workdir, libs)
    finally:
        try:
            cluster.run("stop")
        except Exception as e:  # noqa: BLE001
            print(f"stop: {e}")
    checks.finish()


def run(checks, cluster, plan, records, throughput, workdir, libs):
    prefix = env("TOPIC_PREFIX", f"durability-{int(time.time())}")
    topic = f"{prefix}-durability"
    bootstrap = cluster.start()
    log(f"cluster up: {bootstrap}")
    a = admin(bootstrap)
    fut = a.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                          request_timeout=15)
    fut[topic].result(timeout=30)

    def whole_once():
        ps = partitions(a, topic)
        return all(len(isr) == NODES and leader in isr for leader, _, isr in ps.values()) and ps

    def whole():
        # Three answers in a row, 0.5 s apart: one stale Metadata answer (a node that was just isolated
        # or paused still reports the ISR it last knew) does not end a fault early.
        for _ in range(3):
            ps = whole_once()
            if not ps:
                return False
            time.sleep(0.5)
        return ps

    try:
        wait_for("the topic with a whole ISR", whole, 30, every=0.25)
    except TimeoutError as e:
        checks.check("a 6-partition RF 3 topic (min.insync.replicas=2) with every replica in sync", False, str(e))
        return
    checks.check("a 6-partition RF 3 topic (min.insync.replicas=2) with every replica in sync", True)

    lock = threading.Lock()
    acked = {}            # value -> (partition, offset)
    acks_by_partition = {p: [] for p in range(PARTITIONS)}
    send_errors = []      # (time, value, message)
    consumed = {}         # value -> [(partition, offset)]
    consumer_events = {"shutdown": 0}

    def on_produce(ev):
        name = ev.get("name")
        with lock:
            if name == "producer_send_success":
                acked[ev["value"]] = (ev["partition"], ev["offset"])
                acks_by_partition[ev["partition"]].append(ev["timestamp"] / 1000.0)
            elif name == "producer_send_error":
                send_errors.append((ev.get("timestamp", 0) / 1000.0, ev.get("value"), ev.get("message")))

    def on_consume(ev):
        if ev.get("name") == "record_data":
            with lock:
                consumed.setdefault(ev["value"], []).append((ev["partition"], ev["offset"]))
        elif ev.get("name") == "shutdown_complete":
            consumer_events["shutdown"] += 1

    pconf = os.path.join(workdir, "producer.properties")
    with open(pconf, "w") as f:
        # VerifiableProducer defaults to retries=0, which idempotence refuses: Kafka's producer defaults here.
        f.write("enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n"
                "linger.ms=5\ndelivery.timeout.ms=120000\n"
                "request.timeout.ms=10000\nreconnect.backoff.max.ms=500\n")
    producer = JavaTool("producer", ["org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bootstrap,
                                     "--topic", topic, "--max-messages", str(records), "--throughput",
                                     str(throughput), "--acks", "-1", "--repeating-keys", "600",
                                     "--producer.config", pconf], workdir, on_produce)
    consumer_args = ["org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--group-id", f"{prefix}-durability", "--reset-policy", "earliest", "--verbose",
                     "--session-timeout", "10000"]
    consumers = [JavaTool("consumer", consumer_args, workdir, on_consume)]

    # Steady state first: the baseline stall with no fault.
    t_base = time.time()
    try:
        wait_for("first acknowledgements", lambda: len(acked) >= throughput or producer.proc.poll() is not None, 60, every=0.25)
        if producer.proc.poll() is not None:
            raise TimeoutError(f"the producer exited with {producer.proc.returncode} (see {workdir}/producer.stderr)")
    except TimeoutError as e:
        with lock:
            first = send_errors[0] if send_errors else None
        checks.check("the producer is acknowledged before any fault", False,
                     f"{e}; {len(acked)} acked, {len(send_errors)} producer_send_error, first {first}")
        producer.stop(10)
        for c in consumers:
            c.stop(10)
        return
    time.sleep(5)
    with lock:
        base, _ = stall(acks_by_partition, t_base, time.time())
    log(f"steady state: {len(acked)} acked, longest per-partition ack gap {base * 1000:.0f} ms")

    rows = []
    for i, f in enumerate(plan):
        if producer.proc.poll() is not None:
            log(f"the producer finished after {len(acked)} acks: the remaining faults run without load")
        if consumers[-1].proc.poll() is not None:
            log("the VerifiableConsumer exited: starting another in the same group")
            consumers.append(JavaTool(f"consumer-{len(consumers)}", consumer_args, workdir, on_consume))
        try:
            node, undo = apply_fault(cluster, a, topic, f, libs)
        except Exception as e:  # noqa: BLE001
            checks.check(f"fault {i + 1} ({f['kind']}) applied", False, str(e))
            break
        t0 = time.time()
        log(f"fault {i + 1}/{len(plan)}: {f['kind']} node {node} ({f.get('target', '')}), hold {f['hold_s']} s")
        time.sleep(f["hold_s"])
        try:
            undo()
        except Exception as e:  # noqa: BLE001
            checks.check(f"fault {i + 1} ({f['kind']} node {node}) undone", False, str(e))
            break
        t_undo = time.time()
        try:
            wait_for("a whole ISR again", whole, 120, every=0.25)
            ok = True
        except TimeoutError as e:
            log(f"fault {i + 1}: {e}")
            ok = False
        t_back = time.time()
        time.sleep(2)
        with lock:
            window, part = stall(acks_by_partition, t0, t_back)
            errs = [e for e in send_errors if t0 <= e[0] <= t_back + 2]
        rows.append({"n": i + 1, "kind": f["kind"], "node": node, "at": time.strftime("%H:%M:%S", time.gmtime(t0)),
                     "hold": f["hold_s"], "isr_s": t_back - t_undo, "isr_ok": ok, "window": window,
                     "partition": part, "errors": len(errs)})
        if not ok:
            try:
                state = str(partitions(a, topic))
            except Exception as e:  # noqa: BLE001
                state = str(e)
            checks.check(f"fault {i + 1} ({f['kind']} node {node}): every ISR whole again within 120 s", False, state)
            break

    faulted = len(rows)
    # The producer stops at its count or here; its shutdown hook completes what is in flight.
    with lock:
        sent_during = len(acked)
    producer.stop()
    log(f"producer stopped: {len(acked)} acknowledged ({sent_during} before the stop), "
        f"{len(send_errors)} producer_send_error")
    checks.check("the producer was acknowledged through the faults", len(acked) > throughput * 5,
                 f"{len(acked)} acked")
    checks.check(f"{len(plan)} faults applied and recovered", faulted == len(plan) and all(r["isr_ok"] for r in rows),
                 f"{faulted} of {len(plan)}")

    def all_consumed():
        with lock:
            return not [v for v in acked if v not in consumed]
    try:
        wait_for("every acknowledged record consumed", all_consumed, 120, every=1)
    except TimeoutError:
        pass
    for c in consumers:
        c.stop(60)
    with lock:
        missing = sorted((acked[v][0], acked[v][1], v) for v in acked if v not in consumed)
        dups = sum(len(locs) - 1 for locs in consumed.values() if len(locs) > 1)
        moved = [(v, acked[v], consumed[v][0]) for v in acked if v in consumed and acked[v] not in consumed[v]]
        unknown = [v for v in consumed if v not in acked]
    print(f"consumed {len(consumed)} distinct values; {dups} duplicate deliveries; {len(unknown)} values "
          f"never acknowledged (sends whose outcome was unknown or failed)", flush=True)
    checks.check("every acknowledged record consumed by the VerifiableConsumer (0 missing)", not missing,
                 f"{len(missing)} missing of {len(acked)}, first {missing[:5]}" if missing
                 else f"{len(acked)} acked, all consumed, {dups} duplicates")
    checks.check("every acknowledged record consumed at the partition and offset its ack gave", not moved,
                 f"{len(moved)} elsewhere, first {moved[:3]}")

    # Every replica: wait until the followers hold everything, stop cleanly, read each log dir.
    try:
        wait_for("a whole ISR after the load", whole, 60, every=0.25)
    except TimeoutError as e:
        log(str(e))
    time.sleep(3)
    try:
        cluster.run("stop")
    except Exception as e:  # noqa: BLE001
        checks.check("the cluster stops cleanly before its logs are read", False, str(e))
        return
    by_value = {}
    for v, (p, off) in acked.items():
        by_value.setdefault(p, {})[off] = v
    replicas = {}
    problems = []
    for n in range(1, NODES + 1):
        try:
            dumped = dump_node(cluster.node_dir(n), topic, libs)
        except Exception as e:  # noqa: BLE001
            problems.append(f"node {n}: {e}")
            continue
        for p in range(PARTITIONS):
            if p not in dumped:
                problems.append(f"node {n} p{p}: no replica on disk")
                continue
            recs = dumped[p]
            replicas[(n, p)] = recs
            offs = [o for o, _ in recs]
            if offs != list(range(len(offs))):
                bad = next(i for i, o in enumerate(offs) if o != i)
                problems.append(f"node {n} p{p}: offsets not 0..{len(offs) - 1} in order (at index {bad}: {offs[bad]})")
            stored = dict(recs)
            lost = [(off, v) for off, v in by_value.get(p, {}).items() if stored.get(off) != v]
            if lost:
                problems.append(f"node {n} p{p}: {len(lost)} acked records absent or different, first {sorted(lost)[:3]}")
    for p in range(PARTITIONS):
        seqs = {n: replicas.get((n, p)) for n in range(1, NODES + 1)}
        if any(s is None for s in seqs.values()):
            continue
        if not (seqs[1] == seqs[2] == seqs[3]):
            problems.append(f"p{p}: replicas differ (lengths {[len(s) for s in seqs.values()]})")
    sizes = [len(replicas.get((1, p), [])) for p in range(PARTITIONS)]
    checks.check("every replica of every partition: offsets 0..N-1 in order, identical to the other replicas, "
                 "every acknowledged record at its offset", not problems and bool(replicas),
                 "; ".join(problems[:6]) if problems else f"{NODES} replicas x {PARTITIONS} partitions, records {sizes}")

    print("\nfault  kind     node  at(UTC)   hold_s  isr_back_s  unavailable_ms  partition  send_errors", flush=True)
    for r in rows:
        print(f"{r['n']:5}  {r['kind']:7}  {r['node']:4}  {r['at']}  {r['hold']:6.1f}  {r['isr_s']:10.1f}  "
              f"{r['window'] * 1000:14.0f}  {str(r['partition']):9}  {r['errors']:11}", flush=True)
    if rows:
        ws = sorted(r["window"] for r in rows)
        print(f"unavailability: baseline {base * 1000:.0f} ms, per fault median {ws[len(ws) // 2] * 1000:.0f} ms, "
              f"max {ws[-1] * 1000:.0f} ms; acked {len(acked)}, missing {len(missing)}, duplicates {dups}",
              flush=True)


def apply_fault(cluster, a, topic, f, libs):
    """Apply one fault now; returns (node, undo)."""
    if f["kind"] == "kill":
        if f.get("target") == "controller":
            node = int(quorum_status(cluster.bootstrap)["LeaderId"])
        else:
            node = partitions(a, topic)[f["partition"]][0]
            if node < 1:
                raise RuntimeError(f"partition {f['partition']} has no leader")
        cluster.run("kill", "--node", str(node), "--signal", "KILL")
        return node, lambda: cluster.run("restart", "--node", str(node))
    if f["kind"] == "slow-disk":
        node = partitions(a, topic)[f["partition"]][0]
        if node < 1:
            raise RuntimeError(f"partition {f['partition']} has no leader")
        cluster.run("slow-disk", "--node", str(node), "--delay-ms", str(f["delay_ms"]))
        return node, lambda: cluster.run("fast-disk", "--node", str(node))
    node = f["node"]
    if f["kind"] == "pause":
        cluster.run("pause", "--node", str(node))
        return node, lambda: cluster.run("resume", "--node", str(node))
    cluster.run("isolate", "--node", str(node))
    return node, lambda: cluster.run("heal")


if __name__ == "__main__":
    main()
