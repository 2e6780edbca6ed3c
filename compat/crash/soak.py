"""Kill -9 soak: N cycles of kill -9 of the broker under idempotent acks=all load, then a check of every
acknowledged record. Run by scripts/soak (which builds the release binary and the venv).

One confluent-kafka producer (enable.idempotence, acks=all) streams unique values into a 3-partition topic
for the whole run. Each cycle: produce until CYCLE_ACKS more records are acknowledged (or CYCLE_SECONDS
pass), kill -9 the broker while records are in flight, restart it on the same data directory, go on. After
the last cycle the producer flushes, a consumer reads every partition from offset 0, and the script checks:
  - every acknowledged record is present exactly once, at the partition and offset its delivery report gave
    (lost = acknowledged but absent or elsewhere; duplicated = a value stored more than once);
  - every partition's offsets run 0..N-1 (no gap, no duplicate offset);
  - every stored value is one the producer sent.
Prints one figures line per flush policy and exits non-zero on any loss, duplicate, gap or unknown value.

Env: SLUICE_BIN (the broker binary), SOAK_CYCLES (default 5), SOAK_POLICIES ("default,flush1"), SOAK_DIR
(work dir, default a temp dir), SOAK_CYCLE_ACKS (default 3000), SOAK_CYCLE_SECONDS (default 10).
Only 127.0.0.1; bounded by cycles and per-cycle time.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from compat_common import free_port, port_open  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3
POLICIES = {
    "default": "",
    "flush1": '"log.flush.interval.messages" = 1\n',
}


class Broker:
    """The sluice binary on 127.0.0.1:port over workdir/data, restartable after kill -9."""

    def __init__(self, binary, workdir, port, extra_config):
        self.binary, self.workdir, self.port = binary, workdir, port
        self.config = os.path.join(workdir, "sluice.toml")
        with open(self.config, "w") as f:
            f.write(f'listen = "127.0.0.1:{port}"\n"data.dir" = "{os.path.join(workdir, "data")}"\n')
            f.write(extra_config)
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(os.path.join(self.workdir, f"sluice-{self.starts}.log"), "w")
        self.proc = subprocess.Popen([self.binary, "serve", "--config", self.config],
                                     stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluice exited with {self.proc.returncode} at start {self.starts} "
                                   f"(see {log.name})")
            if port_open(self.port):
                return
            time.sleep(0.02)
        raise RuntimeError("sluice did not listen within 60 s")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def value(i):
    return f"soak-{i:09d}".encode()


def create_topic(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)
    for f in fut.values():
        f.result(60)


def consume_all(bootstrap, topic, timeout=120):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    out, eof = [], set()
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.time() + timeout
        while time.time() < deadline and len(eof) < PARTITIONS:
            for m in c.consume(num_messages=10000, timeout=0.5):
                err = m.error()
                if err is None:
                    out.append((m.partition(), m.offset(), m.value()))
                    eof.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    raise RuntimeError(f"consume: {err}")
        if len(eof) < PARTITIONS:
            raise RuntimeError(f"consume: only partitions {sorted(eof)} reached their end in {timeout} s")
    finally:
        c.close()
    return out


def soak(binary, policy, cycles, base, cycle_acks, cycle_seconds):
    workdir = os.path.join(base, policy)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    port = free_port()
    broker = Broker(binary, workdir, port, POLICIES[policy])
    bootstrap = f"127.0.0.1:{port}"
    topic = f"soak-{policy}"
    broker.start()
    try:
        create_topic(bootstrap, topic)
        acked, errors = {}, []
        lock = threading.Lock()

        def cb(err, msg):
            with lock:
                if err is None:
                    acked[msg.value()] = (msg.partition(), msg.offset())
                else:
                    errors.append(str(err))

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 2, "message.timeout.ms": 120000, "reconnect.backoff.ms": 50,
                      "reconnect.backoff.max.ms": 200, "error_cb": lambda e: None, "log_level": 0})
        i = 0
        in_flight_at_kill = []
        t_start = time.time()
        for cycle in range(cycles):
            target = len(acked) + cycle_acks
            t0 = time.time()
            while len(acked) < target and time.time() - t0 < cycle_seconds:
                try:
                    p.produce(topic, value=value(i), on_delivery=cb)
                    i += 1
                except BufferError:
                    p.poll(0.005)
                    continue
                if i % 100 == 0:
                    p.poll(0)
            in_flight_at_kill.append(i - len(acked))
            broker.kill9()
            time.sleep(0.05)
            broker.start()
        left = p.flush(120)
        elapsed = time.time() - t_start
        recs = consume_all(bootstrap, topic)
    finally:
        broker.stop()

    stored = {}
    offsets = {}
    for pt, off, v in recs:
        stored.setdefault(v, []).append((pt, off))
        offsets.setdefault(pt, []).append(off)
    lost = sum(1 for v, pos in acked.items() if pos not in stored.get(v, []))
    duplicated = sum(1 for v, where in stored.items() if len(where) > 1)
    gaps = []
    for pt, offs in sorted(offsets.items()):
        offs.sort()
        if offs != list(range(len(offs))):
            gaps.append(f"partition {pt}: {len(offs)} records, offsets not 0..{len(offs) - 1}")
    sent = {value(j) for j in range(i)}
    unknown = sum(1 for v in stored if v not in sent)
    print(f"soak: policy={policy} cycles={cycles} acknowledged={len(acked)} lost={lost} duplicated={duplicated} "
          f"stored={len(recs)} sent={i} undelivered={left} delivery_errors={len(errors)} unknown={unknown} "
          f"offset_gaps={len(gaps)} max_in_flight_at_kill={max(in_flight_at_kill, default=0)} "
          f"seconds={elapsed:.0f}", flush=True)
    for g in gaps[:3]:
        print(f"soak:   {g}", flush=True)
    for e in errors[:3]:
        print(f"soak:   delivery error: {e}", flush=True)
    ok = lost == 0 and duplicated == 0 and not gaps and unknown == 0 and left == 0 and cycles > 0 \
        and len(acked) >= cycles
    return ok


def main():
    binary = os.environ.get("SLUICE_BIN")
    if not binary:
        sys.exit("soak: SLUICE_BIN not set")
    cycles = int(os.environ.get("SOAK_CYCLES", "5"))
    policies = [x for x in os.environ.get("SOAK_POLICIES", "default,flush1").split(",") if x]
    for pol in policies:
        if pol not in POLICIES:
            sys.exit(f"soak: unknown policy {pol} (known: {', '.join(POLICIES)})")
    base = os.environ.get("SOAK_DIR") or tempfile.mkdtemp(prefix="sluice-soak-")
    cycle_acks = int(os.environ.get("SOAK_CYCLE_ACKS", "3000"))
    cycle_seconds = float(os.environ.get("SOAK_CYCLE_SECONDS", "10"))
    ok = True
    for pol in policies:
        ok = soak(binary, pol, cycles, base, cycle_acks, cycle_seconds) and ok
    print(f"soak: {'PASS' if ok else 'FAIL'}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
