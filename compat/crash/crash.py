"""Crash test: kill -9 the broker while a producer (confluent-kafka, acks=1) is streaming, restart it on
the same data dir, and check that every acknowledged record is there, intact, at the offset its delivery
report gave, and that every partition's offsets run 0..N-1 with no gap or duplicate.

Starts its own broker. Env: CRASH_BROKER=sluice (SLUICE_BIN) or kafka (KAFKA_REFERENCE script, used to
validate the test itself), CRASH_DIR (work dir), TOPIC_PREFIX. Runs with compat/python/.venv.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compat_common import (Checks, consume_all, create_topic, env, free_port,  # noqa: E402
                           log_error_cb, port_open, print_client_version)
from confluent_kafka import Producer  # noqa: E402


class Broker:
    def __init__(self, kind, workdir, port, props=None, kafka_features=""):
        """props: broker properties beside the defaults (both kinds); kafka_features: feature levels
        the reference Kafka's storage is formatted with (KAFKA_REFERENCE_FEATURES)."""
        self.kind, self.workdir, self.port = kind, workdir, port
        self.props = dict(props or {})
        self.kafka_features = kafka_features
        self.proc = None
        self.pid = None
        self.starts = 0

    def start(self):
        self.starts += 1
        if self.kind == "sluice":
            binary = env("SLUICE_BIN")
            data = os.path.join(self.workdir, "data")
            os.makedirs(data, exist_ok=True)
            logf = open(os.path.join(self.workdir, f"sluice-{self.starts}.log"), "w")
            # As scripts/kafka-reference configures Kafka: no initial rebalance delay.
            conf = os.path.join(self.workdir, "server.toml")
            with open(conf, "w") as f:
                f.write("group.initial.rebalance.delay.ms = 0\n")
                for k, v in self.props.items():
                    f.write(f"{k} = {v}\n")
            self.proc = subprocess.Popen([binary, "serve", "--config", conf, "--listen", f"127.0.0.1:{self.port}",
                                          "--data-dir", data],
                                         stdout=logf, stderr=subprocess.STDOUT)
            self.pid = self.proc.pid
            deadline = time.time() + 60
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"sluice exited with {self.proc.returncode} during start {self.starts}")
                if port_open(self.port):
                    return f"ok sluice listening on {self.port}"
                time.sleep(0.05)
            raise RuntimeError("sluice did not listen within 60s")
        args = [env("KAFKA_REFERENCE"), "start", "--port", str(self.port), "--dir", self.workdir]
        if self.starts > 1:
            args.append("--keep-data")
        ref_env = {**os.environ, "KAFKA_REFERENCE_PROPERTIES": " ".join(f"{k}={v}" for k, v in self.props.items())}
        if self.kafka_features:
            ref_env["KAFKA_REFERENCE_FEATURES"] = self.kafka_features
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, timeout=180, env=ref_env)
        with open(os.path.join(self.workdir, "kafka.pid")) as f:
            self.pid = int(f.read().strip())
        return f"ok kafka listening on {self.port}"

    def kill9(self):
        os.kill(self.pid, signal.SIGKILL)
        if self.proc:
            self.proc.wait(10)
        else:
            for _ in range(100):
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)

    def stop(self):
        if self.kind == "sluice":
            if self.proc and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
        else:
            subprocess.run([env("KAFKA_REFERENCE"), "stop", "--dir", self.workdir], timeout=60)


def value(i):
    return f"crash-{i:08d}-{'c' * (i % 32)}".encode()


def main():
    kind = env("CRASH_BROKER", "sluice")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    before = int(env("CRASH_ACKED_BEFORE_KILL", "20000"))
    print_client_version()
    ch = Checks()
    if kind == "sluice" and not env("SLUICE_BIN"):
        ch.check("environment", False, "SLUICE_BIN not set")
        ch.finish()
    if kind == "kafka" and not env("KAFKA_REFERENCE"):
        ch.check("environment", False, "KAFKA_REFERENCE not set")
        ch.finish()
    base = env("CRASH_DIR") or tempfile.mkdtemp(prefix="sluice-crash-")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    port = free_port()
    broker = Broker(kind, base, port)
    bootstrap = f"127.0.0.1:{port}"
    topic = f"{prefix}-crash"
    print(f"broker={kind} bootstrap={bootstrap} dir={base} kill after {before} acks", flush=True)
    try:
        if not ch.run(f"start {kind}", lambda: broker.start()):
            ch.finish()
        if not ch.run("AdminClient.create_topics(6 partitions)", lambda: create_topic(bootstrap, topic)):
            ch.finish()

        acked = {}      # value -> (partition, offset)
        failed = []
        lock = threading.Lock()

        def cb(err, msg):
            with lock:
                if err is None:
                    acked[msg.value()] = (msg.partition(), msg.offset())
                else:
                    failed.append(str(err))

        p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "enable.idempotence": False,
                      "linger.ms": 2, "message.timeout.ms": 90000, "reconnect.backoff.ms": 100,
                      "reconnect.backoff.max.ms": 500, "error_cb": lambda e: None})
        i = 0
        killed_at = None
        acked_at_kill = 0
        t0 = time.time()
        # Stream until enough acks, kill -9 while still producing, keep producing a moment into the outage
        # (at most 5,000 more records or 1 s, whichever comes first).
        while True:
            if killed_at is not None and (time.time() - t_kill > 1.0 or i - killed_at >= 5000):
                break
            if time.time() - t0 > 120:
                break
            try:
                p.produce(topic, key=f"ck{i % 101}".encode(), value=value(i), on_delivery=cb)
                i += 1
            except BufferError:
                p.poll(0.01)
                continue
            if i % 50 == 0:
                p.poll(0)
            if killed_at is None and len(acked) >= before:
                broker.kill9()
                killed_at = i
                acked_at_kill = len(acked)
                t_kill = time.time()
                print(f"kill -9 after {i} produced, {acked_at_kill} acked, {time.time() - t0:.1f}s", flush=True)
        ch.check("broker killed mid-stream with records in flight", killed_at is not None and killed_at > acked_at_kill,
                 f"produced {killed_at}, acked {acked_at_kill} at the kill")
        if killed_at is None:
            ch.finish()
        before_restart = dict(acked)

        ok = ch.run(f"restart {kind} on the same data dir (kill -9 recovery)", lambda: broker.start())
        if not ok:
            ch.finish()
        left = p.flush(120)
        n_after = 2000
        for j in range(i, i + n_after):
            p.produce(topic, key=f"ck{j % 101}".encode(), value=value(j), on_delivery=cb)
        left += p.flush(60)
        total = i + n_after
        acked_post = sum(1 for j in range(i, total) if value(j) in acked)
        ch.check("producer keeps working after the restart", left == 0 and acked_post == n_after,
                 f"{left} undelivered, {acked_post}/{n_after} new records acked, {len(acked)} acked in all, "
                 f"{len(failed)} failed deliveries")

        recs = consume_all(bootstrap, topic, expected=None, timeout=120)
        by_pos = {(pt, off): v for pt, off, _k, v in recs}
        offsets = {}
        for pt, off, _k, _v in recs:
            offsets.setdefault(pt, []).append(off)

        def contiguous():
            for pt, offs in sorted(offsets.items()):
                offs.sort()
                if offs != list(range(len(offs))):
                    dup = len(offs) - len(set(offs))
                    return f"partition {pt}: {len(offs)} records, offsets not 0..{len(offs) - 1} ({dup} duplicates)"
            return f"ok {len(recs)} records, per partition { {k: len(v) for k, v in sorted(offsets.items())} }"
        ch.run("offsets per partition run 0..N-1 (no gap, no duplicate)", contiguous)

        def acked_present(which, acks):
            missing = wrong = 0
            first = None
            for v, (pt, off) in acks.items():
                got = by_pos.get((pt, off))
                if got is None:
                    missing += 1
                    first = first or f"{v[:20]!r} acked at {pt}/{off} is missing"
                elif got != v:
                    wrong += 1
                    first = first or f"{v[:20]!r} acked at {pt}/{off} but that offset holds {got[:20]!r}"
            if missing or wrong:
                return f"{missing} missing, {wrong} different of {len(acks)} {which} acks; first: {first}"
            return f"ok all {len(acks)} present at their acked offsets"
        ch.run("every record acknowledged before the kill is present, intact, at its acked offset",
               lambda: acked_present("pre-kill", before_restart))
        ch.run("every record acknowledged after the restart is present at its acked offset",
               lambda: acked_present("all", acked))
        valid = {value(j) for j in range(total)}
        bad = [v for v in by_pos.values() if v not in valid]
        ch.check("every stored record is one the producer sent (no torn or garbage records)", not bad,
                 f"{len(bad)} unknown values, first {bad[0][:40]!r}" if bad else f"{len(by_pos)} records checked; "
                 f"{len(by_pos) - len(set(by_pos.values()))} duplicate values from acks=1 retries (allowed)")
    finally:
        broker.stop()
    ch.finish()


if __name__ == "__main__":
    main()
