#!/usr/bin/env python3
"""Side-by-side benchmark driver: Sluice vs Apache Kafka. Run through scripts/bench (which builds things).

Per repetition, each broker (order alternates between repetitions) is started fresh, timed from process
start to the first acknowledged produce, left idle for its idle RSS, then runs every workload in turn while
its RSS and CPU are sampled from /proc. Broker on core 0, clients on core 1 (taskset).
"""
import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import socket
import struct
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_CPU = "0"
CLIENT_CPU = "1"


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------- /proc sampling


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0  # MiB
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()
    # fields[0] is state (field 3); utime is field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_wait(pid):
    """(seconds, timeslices): the time the live threads of pid spent runnable but waiting for a CPU, and how
    many times they were scheduled in, summed from /proc/PID/task/*/schedstat (the scheduler's own
    accounting: run time ns, run-queue wait ns, timeslices). On a core shared with other processes the
    wait, not the CPU time, is what lengthens each request's round trip."""
    wait_ns, slices = 0, 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                _, w, n = f.read().split()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile, or no schedstats in this kernel
        wait_ns += int(w)
        slices += int(n)
    return wait_ns / 1e9, slices


def open_fds(pid):
    """Open file descriptors of the process (entries of /proc/PID/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_limit(pid):
    """The process's soft RLIMIT_NOFILE (from /proc/PID/limits), None if unreadable."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    return int(line.split()[3])
    except (OSError, ValueError, IndexError):
        pass
    return None


def mappings(pid):
    """Memory mappings of the process (lines of /proc/PID/maps): Kafka mmaps its index files."""
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def settle_writeback():
    """Writes back every dirty page (sync) before a workload, so each starts from the same page-cache
    state whatever the one before it wrote: otherwise a produce run that follows gigabytes of
    unwritten data meets the kernel's dirty-page throttling (its writes wait for writeback) and its
    figure depends on the workload order, not on the broker. Returns (Dirty MiB before, seconds the
    sync took); neither is part of any measured phase."""
    dirty = meminfo_mb("Dirty")
    t0 = time.monotonic()
    os.sync()
    return dirty, time.monotonic() - t0


def meminfo_mb(key):
    """A /proc/meminfo figure in MiB (None if absent)."""
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) / 1024
    return None


def reset_hwm(pid):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


class Sampler:
    """Samples VmRSS every interval while a workload runs."""

    def __init__(self, pid, interval=0.2):
        self.pid, self.interval = pid, interval
        self.samples = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append(proc_status(self.pid)["VmRSS"])
            except (OSError, KeyError):
                pass
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_kind(comm):
    """Groups a JVM thread by its name (/proc/PID/task/TID/comm, 15 characters at most)."""
    if comm in ("main", "java"):  # the Java main thread (HotSpot leaves its name as the launcher's)
        return "app"
    if comm.startswith(("kafka-producer", "kafka-consumer", "consumer_backgr")):
        return "network"
    if comm.startswith(("GC Thread", "G1 ", "VM Thread")):
        return "gc"
    if comm.startswith(("C1 Compiler", "C2 Compiler")):
        return "jit"
    return "other"


THREAD_KINDS = ("app", "network", "gc", "jit", "other")


def jvm_threads_cpu(pid):
    """{kind: CPU seconds} summed over the live threads of pid, and {tid: (kind, seconds)}."""
    per_tid = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                data = f.read()
        except OSError:
            continue  # the thread ended between listdir and open
        comm = data[data.index("(") + 1:data.rindex(")")]
        fields = data[data.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X"):
            continue  # exited: keep the last live reading
        per_tid[tid] = (thread_kind(comm), (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return per_tid


def cores_busy_seconds():
    """{cpu number as str: busy (not idle, not iowait) seconds since boot}, from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                v = [int(x) for x in vals]
                out[name[3:]] = (sum(v[:8]) - v[3] - v[4]) / CLK_TCK
    return out


class CpuSampler:
    """Samples, every interval while a client JVM runs: its CPU per thread kind (threads that end keep
    their last value), the busy time of the client core and of the broker core, and the broker's CPU.
    `window(seconds)` then gives the figures over the last `seconds` of the client's life."""

    def __init__(self, pid, broker_pid=None, interval=0.1):
        self.pid, self.broker_pid, self.interval = pid, broker_pid, interval
        self.samples = []  # (t, {kind: s}, client core busy s, broker core busy s, broker cpu s)
        self._tids = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        try:
            self._tids.update(jvm_threads_cpu(self.pid))
        except OSError:
            return  # exited
        kinds = dict.fromkeys(THREAD_KINDS, 0.0)
        for kind, secs in self._tids.values():
            kinds[kind] += secs
        broker = None
        if self.broker_pid:
            try:
                broker = cpu_seconds(self.broker_pid)
            except OSError:
                pass
        cores = cores_busy_seconds()
        self.samples.append((time.monotonic(), kinds, cores.get(CLIENT_CPU, 0.0), cores.get(BROKER_CPU, 0.0), broker))

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def start(self):
        self._t.start()

    def stop(self):
        self._stop.set()
        self._t.join()

    def _at(self, t, get):
        """A cumulative counter at time t, interpolated linearly between samples."""
        s = self.samples
        if t <= s[0][0]:
            return get(s[0])
        for a, b in zip(s, s[1:]):
            if a[0] <= t <= b[0]:
                f = (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0.0
                return get(a) + f * (get(b) - get(a))
        return get(s[-1])

    def window(self, seconds, end):
        """CPU figures over [end - seconds, end]: the client's measured phase (`end`: when the client
        printed its result line, right after its clock stopped)."""
        if len(self.samples) < 3 or seconds <= 0:
            return {}
        t1 = min(end, self.samples[-1][0])
        t0 = max(self.samples[0][0], t1 - seconds)
        span = t1 - t0
        if span <= 0:
            return {}
        d = lambda get: self._at(t1, get) - self._at(t0, get)  # noqa: E731
        out = {"window_s": span}
        out["client_cpu_s"] = sum(d(lambda x, k=k: x[1][k]) for k in THREAD_KINDS)
        for k in THREAD_KINDS:
            out[f"client_{k}_cpu_s"] = d(lambda x, k=k: x[1][k])
        out["client_core_busy_pct"] = 100.0 * d(lambda x: x[2]) / span
        out["broker_core_busy_pct"] = 100.0 * d(lambda x: x[3]) / span
        if all(x[4] is not None for x in self.samples):
            out["broker_window_cpu_s"] = d(lambda x: x[4])
        return out


# ---------------------------------------------------------------- start-to-first-ack (raw wire)
#
# A JVM client spends hundreds of milliseconds loading and JIT-compiling its own send path, which would be
# charged to the broker; this prober is a few raw Kafka requests from the (already running) driver.


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC32C = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _varint(v):
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def one_record_batch(value):
    rec = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    rec = _varint(len(rec)) + rec
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1) + rec
    head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def _request(sock, api_key, version, corr, body):
    msg = struct.pack(">hhi", api_key, version, corr) + _str("bench-startup") + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    return _recv_exact(sock, size)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def time_first_ack(cmd, port, topic, out_path, timeout=120):
    """Launches cmd; returns (Popen, ms to first acknowledged produce, ms to first TCP accept).

    Loop: connect; Metadata v4 (auto-creates the topic); Produce v3 acks=1 of one 16 B record to partition
    0; done when its error code is 0. Retries every few ms on refused connections and errors.
    """
    batch = one_record_batch(b"x" * 16)
    metadata = struct.pack(">i", 1) + _str(topic) + b"\x01"
    produce = (struct.pack(">hhii", -1, 1, 5000, 1) + _str(topic) + struct.pack(">ii", 1, 0)
               + struct.pack(">i", len(batch)) + batch)
    out = open(out_path, "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        return proc, *_probe(proc, port, metadata, produce, out_path, t0, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        out.close()


def _probe(proc, port, metadata, produce, out_path, t0, timeout):
    listen_ms = None
    corr = 0
    while time.monotonic() - t0 < timeout:
        if proc.poll() not in (None, 0):
            raise RuntimeError(f"{proc.args[0]}... exited with {proc.returncode} (see {out_path})")
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.002)
            continue
        if listen_ms is None:
            listen_ms = (time.monotonic() - t0) * 1000
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(1000):
                corr += 1
                _request(sock, 3, 4, corr, metadata)
                corr += 1
                resp = _request(sock, 0, 3, corr, produce)
                # corr id, [topic: name, [partition: index, error_code, ...]]
                name_len = struct.unpack_from(">h", resp, 8)[0]
                error = struct.unpack_from(">h", resp, 8 + 2 + name_len + 4 + 4)[0]
                if error == 0:
                    return (time.monotonic() - t0) * 1000, listen_ms
                time.sleep(0.005)
        except (OSError, ConnectionError, struct.error):
            time.sleep(0.005)
        finally:
            sock.close()
    raise RuntimeError(f"no acknowledged produce within {timeout} s (see {out_path})")


# ---------------------------------------------------------------- clients


def client_cpu_figures(clients, records, seconds, nbytes, marker):
    """Client-side CPU of the last client run over its measured phase (the `seconds` before it printed the
    first stdout line starting with `marker`), per record; plus the JVM's whole-life CPU (start-up, JIT
    warm-up and close included)."""
    ends = [t for t, line in clients.lines if marker.search(line)]
    end = ends[-1] if ends else None  # the last: ProducerPerformance prints progress lines of the same shape
    w = clients.cpu.window(seconds, end) if clients.cpu and end is not None else {}
    out = {"client_cpu_total_s": clients.cpu_total_s}
    if end is not None and clients.cpu and clients.cpu.samples:
        out["client_exit_after_result_s"] = clients.cpu.samples[-1][0] - end
    if not w or not records:
        return out
    out["client_window_s"] = w["window_s"]
    out["client_cpu_s"] = w["client_cpu_s"]
    out["client_jvm_pct_of_core"] = 100.0 * w["client_cpu_s"] / w["window_s"]
    out["client_core_busy_pct"] = w["client_core_busy_pct"]
    # records handled in the window: the window is the measured phase, at the measured rate
    rec = records * min(1.0, w["window_s"] / seconds)
    out["client_cpu_us_per_record"] = 1e6 * w["client_cpu_s"] / rec
    for k in THREAD_KINDS:
        out[f"client_{k}_cpu_us_per_record"] = 1e6 * w[f"client_{k}_cpu_s"] / rec
    out["broker_core_busy_pct"] = w["broker_core_busy_pct"]
    if "broker_window_cpu_s" in w:
        out["broker_pct_of_core"] = 100.0 * w["broker_window_cpu_s"] / w["window_s"]
    return out


class Clients:
    def __init__(self, libs, classes, logdir, go_bin=None, rdkafka_bin=None):
        self.cp = f"{libs}/*:{classes}"
        self.logdir = logdir
        self.go_bin = go_bin  # bench/go (benchgo): the franz-go client
        self.rdkafka_bin = rdkafka_bin  # librdkafka's rdkafka_performance (scripts/librdkafka)
        self.log4j = os.path.join(ROOT, "bench", "log4j2-client.properties")
        self.broker_pid = None  # sampled alongside each client when set
        self.cpu, self.cpu_total_s, self.lines = None, None, []

    def java(self, args, name, timeout=600, env=None):
        """Runs a client JVM on the client core (see run)."""
        return self.run(["java", "-Xms512m", "-Xmx1g", f"-Dlog4j2.configurationFile={self.log4j}", "-cp", self.cp]
                        + args, name, timeout, env)

    def run(self, argv, name, timeout=600, env=None):
        """Runs a client process on the client core; its CPU is sampled meanwhile (self.cpu: CpuSampler,
        self.cpu_total_s: utime+stime of the whole process from its rusage, start-up included)."""
        cmd = ["taskset", "-c", CLIENT_CPU] + argv
        logf = os.path.join(self.logdir, name + ".log")
        e = dict(os.environ)
        if env:
            e.update(env)
        with open(logf, "w") as lf:
            lf.write("$ " + " ".join(cmd) + "\n")
            lf.flush()
            # taskset execs the client, so the child's pid is the client's and its rusage is the client's
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=lf, text=True, bufsize=1, env=e)
            sampler = CpuSampler(p.pid, self.broker_pid)
            sampler.start()
            watchdog = threading.Timer(timeout, p.kill)
            watchdog.start()
            lines = []  # (arrival time, line): the result line's time ends the client's measured phase
            try:
                for line in p.stdout:
                    lines.append((time.monotonic(), line))
                p.wait()
            except BaseException:
                p.kill()
                p.wait()
                raise
            finally:
                watchdog.cancel()
                sampler.stop()
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = "".join(line for _, line in lines)
            lf.write(out)
        self.cpu = sampler
        self.lines = lines
        self.cpu_total_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        if p.returncode != 0:
            raise RuntimeError(f"{name}: exit {p.returncode} (see {logf})")
        return out

    def bench(self, args, name, **kw):
        out = self.java(["BenchClient"] + args, name, **kw)
        for line in out.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
                if "records" in res and "seconds" in res:  # consume: the poll loop is the measured phase
                    if res.get("fetches", -1) >= 0 and res["seconds"] > 0:
                        res["fetches_per_sec"] = res["fetches"] / res["seconds"]
                    res.update(client_cpu_figures(self, res["records"], res["seconds"], res.get("bytes", 0),
                                                  re.compile(r"^RESULT ")))
                return res
        raise RuntimeError(f"{name}: no RESULT line (see {self.logdir}/{name}.log)")

    PP_RE = re.compile(
        r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
        r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")

    # `--print-metrics` lines: "group:name:{tags}   : value"
    METRIC_RE = re.compile(r"^([\w.-]+):([\w.-]+):\{([^}]*)\}\s+:\s+(\S+)\s*$")
    # producer-metrics (client-wide) kept in the results, as producer_<name with _>
    # (Not the *-rate metrics: a Kafka client Rate divides by at least (samples - 1) x 30 s windows, so on a
    # run of a few seconds it is far below the real rate; per-second figures are computed from *-total.)
    PRODUCER_METRICS = ("batch-size-avg", "records-per-request-avg", "request-total", "request-latency-avg",
                        "record-queue-time-avg", "request-size-avg", "io-wait-time-ns-total",
                        "bufferpool-wait-time-ns-total", "select-total")

    def producer_perf(self, bootstrap, topic, n, size, acks, name, linger_ms=5, extra_props=(), timeout=600):
        out = self.java(["org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(n),
                         "--record-size", str(size), "--throughput", "-1", "--print-metrics", "--producer-props",
                         f"bootstrap.servers={bootstrap}", f"acks={acks}", f"linger.ms={linger_ms}",
                         "batch.size=131072", *extra_props],
                        name, timeout=timeout)
        m = None
        metrics = {}
        for line in out.splitlines():
            mm = self.PP_RE.search(line)
            if mm:
                m = mm  # the last one is the final summary
            mt = self.METRIC_RE.match(line)
            if mt and mt.group(1) == "producer-metrics" and mt.group(2) in self.PRODUCER_METRICS \
                    and "," not in mt.group(3):  # client-id only: not per node or topic
                try:
                    v = float(mt.group(4).replace(",", ""))
                except ValueError:
                    continue
                if math.isfinite(v):
                    metrics["producer_" + mt.group(2).replace("-", "_")] = v
        if not m:
            raise RuntimeError(f"{name}: no ProducerPerformance summary")
        if int(m.group(1)) != n:
            raise RuntimeError(f"{name}: {m.group(1)} of {n} records sent")
        res = {"records_per_sec": float(m.group(2)), "mb_per_sec": float(m.group(3)),
               "avg_ms": float(m.group(4)), "max_ms": float(m.group(5)), "p50_ms": float(m.group(6)),
               "p95_ms": float(m.group(7)), "p99_ms": float(m.group(8)), "p999_ms": float(m.group(9))}
        res.update(metrics)
        run_s = n / res["records_per_sec"]
        if "producer_request_total" in res:  # every request of the run (a few are Metadata/ApiVersions)
            res["producer_requests_per_sec"] = res["producer_request_total"] / run_s
        # share of the run the sender thread spent waiting in select(), and send() blocked on buffer memory
        if "producer_io_wait_time_ns_total" in res:
            res["producer_io_wait_share"] = res.pop("producer_io_wait_time_ns_total") / 1e9 / run_s
        if "producer_bufferpool_wait_time_ns_total" in res:
            res["producer_bufferpool_wait_share"] = res.pop("producer_bufferpool_wait_time_ns_total") / 1e9 / run_s
        # the measured phase: ProducerPerformance's own clock (n records at the reported rate)
        res.update(client_cpu_figures(self, n, run_s, n * size, self.PP_RE))
        return res


    # rdkafka_performance's summary line: "% N messages produced (B bytes), D delivered (offset O, F failed) in
    # T ms: R msgs/s and M MB/s, E produce failures, Q in queue, C compression"; printed every second and once
    # more at the end (the last one is the result)
    RDK_RE = re.compile(r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset (-?\d+), (\d+) failed\) "
                        r"in (\d+)ms: (\d+) msgs/s and ([\d.]+) MB/s, (\d+) produce failures")

    def rdkafka(self, args, name, n, size, timeout=600):
        """Runs librdkafka's rdkafka_performance producer on the client core: records/s and MB/s from its final
        summary (delivered records over its own clock: first produce() to the last delivery report), its CPU
        over that phase (sampled from /proc; one process, no JVM thread roles), and its whole-life CPU."""
        out = self.run([self.rdkafka_bin, "-P", "-s", str(size), "-c", str(n)] + args, name, timeout)
        m = None
        for line in out.splitlines():
            mm = self.RDK_RE.search(line)
            if mm:
                m = mm
        if not m:
            raise RuntimeError(f"{name}: no rdkafka_performance summary (see {self.logdir}/{name}.log)")
        produced, delivered, failed = int(m.group(1)), int(m.group(3)), int(m.group(5))
        if delivered != n or failed or produced != n:
            raise RuntimeError(f"{name}: {delivered} of {n} records delivered, {failed} failed")
        ms = int(m.group(6))
        secs = ms / 1000.0
        res = {"records_per_sec": n / secs if secs else float(m.group(7)), "mb_per_sec": n * size / 2**20 / secs,
               "seconds": secs, "records": n}
        fig = client_cpu_figures(self, n, secs, n * size, self.RDK_RE)
        for k in ("client_cpu_total_s", "client_window_s", "client_core_busy_pct", "broker_core_busy_pct",
                  "broker_pct_of_core", "client_cpu_us_per_record", "client_cpu_s"):
            if k in fig:
                res[k] = fig[k]
        if "client_cpu_s" in fig and fig.get("client_window_s"):
            res["client_pct_of_core"] = 100.0 * fig["client_cpu_s"] / fig["client_window_s"]
        return res

    def go(self, args, name, timeout=600):
        """Runs bench/go (franz-go) with GOMAXPROCS=1 on the client core: its RESULT line, plus its CPU over
        the measured phase from its own getrusage (`client_process_cpu_s`, exact) and the cores' and the
        broker's CPU over the same window from the sampler. The Go runtime's threads have no roles worth
        splitting like the JVM's, so only the process total is kept."""
        out = self.run([self.go_bin] + args, name, timeout, env={"GOMAXPROCS": "1"})
        for line in out.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
                secs, records, cpu = res["seconds"], res["records"], res["client_process_cpu_s"]
                fig = client_cpu_figures(self, records, secs, res["bytes"], re.compile(r"^RESULT "))
                for k in ("client_cpu_total_s", "client_window_s", "client_core_busy_pct", "broker_core_busy_pct",
                          "broker_pct_of_core"):
                    if k in fig:
                        res[k] = fig[k]
                res["client_pct_of_core"] = 100.0 * cpu / secs
                res["client_cpu_us_per_record"] = 1e6 * cpu / records
                # request counts (franz-go hooks) under the names the Java clients' metrics have here
                if "produce_requests" in res:
                    res["producer_request_total"] = res.pop("produce_requests")
                    res["producer_requests_per_sec"] = res["producer_request_total"] / secs
                    res["producer_records_per_request_avg"] = res.pop("records_per_request_avg")
                    res["producer_batch_size_avg"] = res.pop("batch_bytes_avg")
                if "fetches" in res:
                    res["fetches_per_sec"] = res["fetches"] / secs
                return res
        raise RuntimeError(f"{name}: no RESULT line (see {self.logdir}/{name}.log)")


# ---------------------------------------------------------------- brokers


class Sluice:
    name = "sluice"

    def __init__(self, binary, rundir):
        self.binary, self.rundir = binary, rundir
        self.pid = None

    def start(self, clients, tag):
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        data = os.path.join(self.rundir, f"sluice-{tag}")
        shutil.rmtree(data, ignore_errors=True)
        cmd = ["taskset", "-c", BROKER_CPU, self.binary, "serve", "--listen", self.bootstrap, "--data-dir", data]
        self.proc, first_ack, listen = time_first_ack(cmd, self.port, "startup",
                                                      os.path.join(clients.logdir, f"{tag}-sluice-broker.log"))
        self.pid = self.proc.pid  # taskset execs the broker
        with open(f"/proc/{self.pid}/comm") as f:
            comm = f.read().strip()
        if comm != "sluice":
            raise RuntimeError(f"pid {self.pid} is {comm}, not sluice")
        return first_ack, listen

    def stop(self):
        if self.pid is None:
            return
        try:
            os.kill(self.pid, 15)
            for _ in range(100):
                os.kill(self.pid, 0)
                time.sleep(0.1)
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.pid = None


class Kafka:
    name = "kafka"

    def __init__(self, rundir):
        self.rundir = rundir
        self.script = os.path.join(ROOT, "scripts", "kafka-reference")
        self.pid = None
        self.dir = None

    def start(self, clients, tag):
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.dir = os.path.join(self.rundir, f"kafka-{tag}")
        shutil.rmtree(self.dir, ignore_errors=True)
        # Format (KRaft storage format is a separate admin step) with one untimed start/stop; the timed start
        # then runs on the formatted, empty data dir.
        with open(os.path.join(clients.logdir, f"{tag}-kafka-format.log"), "w") as lf:
            subprocess.run([self.script, "start", "--dir", self.dir, "--port", str(self.port)],
                           stdout=lf, stderr=lf, check=True, timeout=180)
            subprocess.run([self.script, "stop", "--dir", self.dir], stdout=lf, stderr=lf, check=True, timeout=60)
        cmd = ["taskset", "-c", BROKER_CPU, self.script, "start", "--dir", self.dir, "--port", str(self.port),
               "--keep-data"]
        launcher, first_ack, listen = time_first_ack(cmd, self.port, "startup",
                                                     os.path.join(clients.logdir, f"{tag}-kafka-broker.log"))
        launcher.wait(timeout=120)  # the script returns once Kafka logs "started"
        for _ in range(100):
            try:
                with open(os.path.join(self.dir, "kafka.pid")) as f:
                    self.pid = int(f.read().strip())
                break
            except (OSError, ValueError):
                time.sleep(0.1)
        with open(f"/proc/{self.pid}/comm") as f:
            comm = f.read().strip()
        if comm != "java":
            raise RuntimeError(f"pid {self.pid} is {comm}, not java")
        return first_ack, listen

    def stop(self):
        if self.dir:
            subprocess.run([self.script, "stop", "--dir", self.dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        self.pid = None


class Sink:
    """bench/java/BenchSink: answers produce and stores nothing (the client-side ceiling)."""
    name = "sink"

    def __init__(self, libs, classes):
        self.cp = f"{libs}/*:{classes}"
        self.proc = None

    def start(self, clients, tag):
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        cmd = ["taskset", "-c", BROKER_CPU, "java", "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-cp", self.cp,
               "BenchSink", str(self.port), "6"]
        self.proc, first_ack, listen = time_first_ack(cmd, self.port, "startup",
                                                      os.path.join(clients.logdir, f"{tag}-sink.log"))
        self.pid = self.proc.pid
        return first_ack, listen

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


# ---------------------------------------------------------------- workloads


def settings(quick):
    if quick:
        return {"n_1k": 200_000, "n_100b": 500_000, "n_warmup": 50_000, "lat_rate": 1000, "lat_secs": 10, "lat_warmup": 2,
                "lat_size": 1024, "idle_settle_s": 3, "n_go_1k": 2_500_000, "n_go_100b": 7_000_000,
                "p10k_partitions": 10_000, "p10k_per_partition": 10, "p10k_size": 100, "p10k_step": 5_000,
                "n_rdk": 300_000}
    return {"n_1k": 1_000_000, "n_100b": 3_000_000, "n_warmup": 200_000, "lat_rate": 1000, "lat_secs": 30, "lat_warmup": 5,
            "lat_size": 1024, "idle_settle_s": 5, "n_go_1k": 4_000_000, "n_go_100b": 12_000_000,
            "p10k_partitions": 10_000, "p10k_per_partition": 100, "p10k_size": 100, "p10k_step": 5_000,
            "n_rdk": 1_048_576}


# A diagnostic produce workload: 100 B records with linger.ms=100, so batches fill up to batch.size whatever
# the broker's answer time (at the client's rate a 128 KiB batch of one partition fills in well under
# 100 ms): both brokers then get the same requests, and the client's CPU per record no longer depends on
# how fast the broker answers.
LINGER_FULL_MS = 100


def produce_workloads(cfg):
    """(name, topic, records, record size, acks, linger.ms)"""
    return [("produce-1k-acks1", "p1k-acks1", cfg["n_1k"], 1024, "1", 5),
            ("produce-1k-acksall", "p1k-acksall", cfg["n_1k"], 1024, "all", 5),
            ("produce-100b-acks1", "p100b", cfg["n_100b"], 100, "1", 5),
            ("produce-100b-acks1-fullbatch", "p100b-full", cfg["n_100b"], 100, "1", LINGER_FULL_MS)]


# The Go client's produce workloads (bench/go, franz-go): same shape as the Java ones (linger 5 ms, batches up
# to 128 KiB, 6 partitions), more records, because the client is several times faster.
def go_produce_workloads(cfg):
    """(name, topic, records, record size, acks)"""
    return [("produce-1k-acks1-go", "g1k-acks1", cfg["n_go_1k"], 1024, "1"),
            ("produce-1k-acksall-go", "g1k-acksall", cfg["n_go_1k"], 1024, "all"),
            ("produce-100b-acks1-go", "g100b", cfg["n_go_100b"], 100, "1")]


GO_CONSUME_TOPIC = "g1k-acks1"  # consume-1k-go reads what produce-1k-acks1-go wrote


# records and bytes each workload moves (for CPU per record and per GiB)
def workload_volume(cfg):
    vol = {name: (n, n * size) for name, _, n, size, _, _ in produce_workloads(cfg)}
    vol.update({name: (n, n * size) for name, _, n, size, _ in go_produce_workloads(cfg)})
    vol["consume-1k-go"] = (cfg["n_go_1k"], cfg["n_go_1k"] * 1024)
    vol["consume-1k"] = (cfg["n_1k"], cfg["n_1k"] * 1024)
    n_lat = cfg["lat_rate"] * (cfg["lat_secs"] + cfg["lat_warmup"])
    vol["latency-e2e-1k"] = (n_lat, n_lat * cfg["lat_size"])
    return vol


def run_partitions_10k(broker, clients, tag, cfg):
    """partitions-10k on a freshly started broker: create one topic of 10,000 partitions, produce
    round-robin to all of them, read everything back; the broker's open fds and RSS after each phase.
    Returns {workload: metrics} for the partitions-10k-* workloads."""
    tag = f"{tag}-p10k"
    parts, per, size = cfg["p10k_partitions"], cfg["p10k_per_partition"], cfg["p10k_size"]
    total = parts * per
    log(f"[{tag}] {broker.name}: start for partitions-10k ({parts:,} partitions x {per} records of {size} B)")
    res = {}
    try:
        broker.start(clients, tag)
        pid, b = broker.pid, broker.bootstrap
        time.sleep(cfg["idle_settle_s"])
        phases = {"idle": {"fds": open_fds(pid), "rss_mb": proc_status(pid)["VmRSS"], "maps": mappings(pid)}}
        limit = fd_limit(pid)

        def phase(name, fn):
            reset_hwm(pid)
            c0 = cpu_seconds(pid)
            t0 = time.monotonic()
            m = fn()
            m["wall_s"] = time.monotonic() - t0
            m["broker_cpu_s"] = cpu_seconds(pid) - c0
            st = proc_status(pid)
            m.update({"fds": open_fds(pid), "rss_mb": st["VmRSS"], "rss_peak_mb": st["VmHWM"],
                      "maps": mappings(pid)})
            phases[name] = m
            log(f"[{tag}] {broker.name}: {name} {m}")
            return m

        phase("create", lambda: clients.bench(["create-topic", b, "p10k", str(parts), str(cfg["p10k_step"])],
                                               f"{tag}-{broker.name}-create", timeout=600))
        phase("produce", lambda: clients.bench(["produce-rr", b, "p10k", str(parts), str(per), str(size)],
                                                f"{tag}-{broker.name}-produce", timeout=600))
        phase("consume", lambda: clients.bench(["consume", b, "p10k", str(total)],
                                                f"{tag}-{broker.name}-consume", timeout=600))
        c, p, k = phases["create"], phases["produce"], phases["consume"]
        res["partitions-10k-create"] = {"s": c["ready_s"], "create_s": c["create_s"], "partitions": parts,
                                        "broker_cpu_s": c["broker_cpu_s"]}
        res["partitions-10k-produce"] = {k2: p[k2] for k2 in ("records_per_sec", "mb_per_sec", "seconds",
                                                              "records", "broker_cpu_s", "rss_peak_mb")}
        res["partitions-10k-consume"] = {k2: k[k2] for k2 in ("records_per_sec", "mb_per_sec", "seconds",
                                                              "records", "fetches", "broker_cpu_s", "rss_peak_mb")}
        res["partitions-10k-rss"] = {"rss_mb": k["rss_mb"], "peak_mb": max(v["rss_peak_mb"] for v in (c, p, k)),
                                     **{f"rss_{n}_mb": v["rss_mb"] for n, v in phases.items()}}
        res["partitions-10k-fds"] = {"fds": max(v["fds"] for v in phases.values()), "fd_soft_limit": limit,
                                     **{f"fds_{n}": v["fds"] for n, v in phases.items()},
                                     **{f"maps_{n}": v["maps"] for n, v in phases.items()}}
    finally:
        broker.stop()
        shutil.rmtree(os.path.join(broker.rundir, f"{broker.name}-{tag}"), ignore_errors=True)
    return res


# librdkafka's rdkafka_performance (the client under kcat, confluent-kafka and most non-JVM clients): each
# workload on a broker started fresh for it, with its own empty data dir. (name, partitions, rdkafka args)
# Both at librdkafka's producer defaults otherwise (linger.ms 5, batch.size 1 MB, 1M messages queued, 5
# requests in flight per connection when idempotent, 1,000,000 otherwise).
RDKAFKA_WORKLOADS = [
    ("produce-1k-acksall-idem-1p-rdkafka", 1, ["-p", "0", "-a", "-1", "-X", "enable.idempotence=true"]),
    ("produce-1k-acks1-rdkafka", 6, ["-a", "1"]),
]
RDKAFKA_SIZE = 1024


def run_rdkafka(broker, clients, tag, cfg):
    """The librdkafka workloads, each on a freshly started broker (empty data dir) that is stopped and its data
    deleted after it. Returns {workload: metrics}."""
    res = {}
    n = cfg["n_rdk"]
    for name, partitions, args in RDKAFKA_WORKLOADS:
        wtag = f"{tag}-rdk{partitions}"
        log(f"[{wtag}] {broker.name}: start for {name}")
        try:
            broker.start(clients, wtag)
            clients.broker_pid = broker.pid
            b = broker.bootstrap
            clients.bench(["create-topics", b, f"rdk:{partitions}"], f"{wtag}-{broker.name}-create-topic")
            dirty_mb, sync_s = settle_writeback()
            free_mb = meminfo_mb("MemFree")
            reset_hwm(broker.pid)
            with open(f"/proc/{broker.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            u0, s0 = int(fields[11]), int(fields[12])
            w0, n0 = runqueue_wait(broker.pid)
            t0 = time.monotonic()
            m = clients.rdkafka(["-t", "rdk", "-b", b] + args, f"{wtag}-{broker.name}-{name}", n, RDKAFKA_SIZE)
            m["wall_s"] = time.monotonic() - t0
            with open(f"/proc/{broker.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            m["broker_user_s"] = (int(fields[11]) - u0) / CLK_TCK
            m["broker_sys_s"] = (int(fields[12]) - s0) / CLK_TCK
            m["broker_cpu_s"] = m["broker_user_s"] + m["broker_sys_s"]
            w1, n1 = runqueue_wait(broker.pid)
            m["broker_runqueue_wait_s"], m["broker_timeslices"] = w1 - w0, n1 - n0
            m["broker_cpu_us_per_record"] = 1e6 * m["broker_cpu_s"] / n
            m["broker_cpu_s_per_gib"] = m["broker_cpu_s"] / (n * RDKAFKA_SIZE / 2**30)
            m["dirty_mb_before"], m["writeback_sync_s"], m["memfree_mb_before"] = dirty_mb, sync_s, free_mb
            m["rss_peak_mb"] = proc_status(broker.pid)["VmHWM"]
            res[name] = m
            log(f"[{wtag}] {broker.name}: {name} {m['records_per_sec']:,.0f} records/s, broker CPU "
                f"{m['broker_cpu_s']:.2f}s (user {m['broker_user_s']:.2f}, sys {m['broker_sys_s']:.2f}), waited "
                f"{m['broker_runqueue_wait_s']:.2f}s for a CPU, "
                f"client {m.get('client_pct_of_core', 0):.0f}% of its core")
        finally:
            clients.broker_pid = None
            broker.stop()
            shutil.rmtree(os.path.join(broker.rundir, f"{broker.name}-{wtag}"), ignore_errors=True)
    return res


def run_broker(broker, clients, tag, cfg, p10k_only=False, go_only=False, p10k=True):
    """Start one broker, run every workload (go_only: only the *-go ones), stop it; then partitions-10k on a
    fresh start if p10k. Returns {workload: metrics}."""
    res = {}
    if p10k_only and broker.name != "sink":
        return run_partitions_10k(broker, clients, tag, cfg)
    log(f"[{tag}] {broker.name}: start")
    try:
        start_ms, listen_ms = broker.start(clients, tag)
        clients.broker_pid = broker.pid
        if broker.name == "sink":
            b = broker.bootstrap
            clients.producer_perf(b, "warmup", cfg["n_warmup"], 1024, "1", f"{tag}-sink-warmup")
            for name, topic, n, size, acks, linger in produce_workloads(cfg):
                c0 = cpu_seconds(broker.pid)
                res[name] = clients.producer_perf(b, topic, n, size, acks, f"{tag}-sink-{name}", linger)
                res[name]["broker_cpu_s"] = cpu_seconds(broker.pid) - c0
                log(f"[{tag}] sink: {name} {res[name]['records_per_sec']:.0f} records/s, client "
                    f"{res[name].get('client_cpu_us_per_record', 0):.2f} us/record")
            return res
        res["start-to-first-ack"] = {"ms": start_ms, "listen_ms": listen_ms}
        c0, t0 = cpu_seconds(broker.pid), time.monotonic()
        time.sleep(cfg["idle_settle_s"])
        idle_cpu_pct = 100.0 * (cpu_seconds(broker.pid) - c0) / (time.monotonic() - t0)
        st = proc_status(broker.pid)
        res["rss-idle"] = {"rss_mb": st["VmRSS"], "idle_cpu_pct_of_core": idle_cpu_pct}
        log(f"[{tag}] {broker.name}: first ack after {start_ms:.0f} ms, idle RSS {st['VmRSS']:.1f} MiB, "
            f"idle CPU {idle_cpu_pct:.1f}%")
        b = broker.bootstrap
        topics = (("warmup", 6), ("p1k-acks1", 6), ("p1k-acksall", 6), ("p100b", 6), ("p100b-full", 6), ("lat", 1),
                  *((t, 6) for _, t, *_ in go_produce_workloads(cfg)))
        clients.bench(["create-topics", b, *(f"{t}:{n}" for t, n in topics)], f"{tag}-{broker.name}-create-topics")
        volume = workload_volume(cfg)

        def measured(name, fn):
            dirty_mb, sync_s = settle_writeback()
            reset_hwm(broker.pid)
            c0 = cpu_seconds(broker.pid)
            t0 = time.monotonic()
            with Sampler(broker.pid) as s:
                m = fn()
            m["wall_s"] = time.monotonic() - t0
            m["dirty_mb_before"], m["writeback_sync_s"] = dirty_mb, sync_s
            m["broker_cpu_s"] = cpu_seconds(broker.pid) - c0
            # broker CPU over the whole workload (client JVM start-up and close included: the broker's
            # idle CPU in that time is charged too, see rss-idle idle_cpu_pct_of_core)
            records, nbytes = volume[name]
            m["broker_cpu_us_per_record"] = 1e6 * m["broker_cpu_s"] / records
            m["broker_cpu_s_per_gib"] = m["broker_cpu_s"] / (nbytes / 2**30)
            st = proc_status(broker.pid)
            m["rss_peak_mb"] = st["VmHWM"]
            m["rss_load_mb"] = statistics.median(s.samples) if s.samples else st["VmRSS"]
            res[name] = m
            head = {k: round(m[k], 2) for k in ("records_per_sec", "mb_per_sec", "p99_ms", "client_jvm_pct_of_core",
                                                "client_pct_of_core", "broker_pct_of_core",
                                                "client_cpu_us_per_record") if k in m}
            log(f"[{tag}] {broker.name}: {name} {head} cpu {m['broker_cpu_s']:.1f}s peak RSS {m['rss_peak_mb']:.0f} MiB")

        n1k = cfg["n_1k"]
        # untimed warm-up (JIT, page cache, connections' first requests): steady state is what we compare
        clients.producer_perf(b, "warmup", cfg["n_warmup"], 1024, "1", f"{tag}-{broker.name}-warmup")
        if not go_only:
            for name, topic, n, size, acks, linger in produce_workloads(cfg):
                measured(name, lambda: clients.producer_perf(b, topic, n, size, acks, f"{tag}-{broker.name}-{name}",
                                                             linger))
            measured("consume-1k", lambda: clients.bench(["consume", b, "p1k-acks1", str(n1k)],
                                                         f"{tag}-{broker.name}-consume-1k"))
            measured("latency-e2e-1k", lambda: clients.bench(
                ["latency", b, "lat", str(cfg["lat_rate"]), str(cfg["lat_secs"]), str(cfg["lat_size"]),
                 str(cfg["lat_warmup"])], f"{tag}-{broker.name}-latency"))
        # the Go client (after every Java workload, so those run as they always have)
        for name, topic, n, size, acks in go_produce_workloads(cfg):
            measured(name, lambda: clients.go(["produce", b, topic, str(n), str(size), acks],
                                              f"{tag}-{broker.name}-{name}"))
        measured("consume-1k-go", lambda: clients.go(["consume", b, GO_CONSUME_TOPIC, "6", str(cfg["n_go_1k"])],
                                                     f"{tag}-{broker.name}-consume-1k-go"))
        res["rss-peak-under-load"] = {"rss_mb": max(res[w]["rss_peak_mb"] for w in res if "rss_peak_mb" in res[w])}
    finally:
        clients.broker_pid = None
        broker.stop()
    if broker.name != "sink" and p10k and not go_only:
        res.update(run_partitions_10k(broker, clients, tag, cfg))
    return res


# ---------------------------------------------------------------- --cluster N: N brokers, RF N


CLUSTER_TOPIC = "rf3"
CLUSTER_PARTITIONS = 6
CLUSTER_MIN_ISR = 2


class Cluster:
    """N combined nodes on 127.0.0.1..N through scripts/cluster (sluice, or Apache Kafka with --kafka), every
    node pinned to the broker core (the script runs under `taskset`, its children inherit the affinity)."""

    def __init__(self, kind, nodes, rundir, sluice_bin, kafka_version):
        self.name, self.nodes = kind, nodes
        self.rundir = rundir
        self.sluice_bin, self.kafka_version = sluice_bin, kafka_version
        self.script = os.path.join(ROOT, "scripts", "cluster")
        self.dir = None

    def _env(self):
        env = dict(os.environ, SLUICE_BIN=self.sluice_bin)
        if self.name == "kafka":
            env["KAFKA_VERSION"] = self.kafka_version
        return env

    def start(self, clients, tag):
        self.dir = os.path.join(self.rundir, f"cluster-{self.name}-{tag}")
        shutil.rmtree(self.dir, ignore_errors=True)
        cmd = ["taskset", "-c", BROKER_CPU, self.script, "start", "--dir", self.dir, "--nodes", str(self.nodes)]
        if self.name == "kafka":
            cmd.append("--kafka")
        t0 = time.monotonic()
        with open(os.path.join(clients.logdir, f"{tag}-cluster-{self.name}.log"), "w") as lf:
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=lf, text=True, env=self._env(), timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"scripts/cluster start ({self.name}) failed: see {clients.logdir}/{tag}-cluster-{self.name}.log")
        self.bootstrap = out.stdout.strip().splitlines()[-1]
        self.pids = []
        for i in range(1, self.nodes + 1):
            with open(os.path.join(self.dir, f"node-{i}", "pid")) as f:
                self.pids.append(int(f.read().strip()))
        return (time.monotonic() - t0) * 1000

    def cpu_seconds(self):
        return sum(cpu_seconds(p) for p in self.pids)

    def rss_mb(self):
        return sum(proc_status(p)["VmRSS"] for p in self.pids)

    def stop(self):
        if self.dir:
            subprocess.run([self.script, "stop", "--dir", self.dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=self._env(), timeout=120)


def cluster_settings(quick):
    return {"n_cluster": 200_000 if quick else 1_000_000}


def describe_topic(clients, bootstrap, name):
    """kafka-topics --describe of the bench topic (its leaders, replicas and ISR), as text."""
    return clients.run(["java", "-cp", clients.cp, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                        bootstrap, "--describe", "--topic", CLUSTER_TOPIC], name, timeout=120)


def acks_all_refused(clients, bootstrap, name):
    """Why a short acks=all produce to the RF N topic failed (e.g. the leader answered NOT_ENOUGH_REPLICAS
    because its followers never joined the ISR), or None when every record was acknowledged. A broker without
    replication would otherwise keep the measured producer retrying until its delivery timeout."""
    props = ("delivery.timeout.ms=20000", "request.timeout.ms=5000")
    try:
        clients.producer_perf(bootstrap, CLUSTER_TOPIC, 1000, 1024, "all", name, 0, props, timeout=120)
    except RuntimeError as e:
        with open(os.path.join(clients.logdir, name + ".log")) as f:
            errors = sorted(set(re.findall(r"Error: ([A-Z_]+)", f.read())))
        return ", ".join(errors) or str(e)
    return None


def run_cluster(cluster, clients, tag, cfg):
    """The --cluster workload on a fresh N-node cluster: a topic of 6 partitions with RF N and
    min.insync.replicas=2, then ProducerPerformance acks=all (idempotent, Java's default) of 1 KiB records;
    throughput, p50/p99 produce latency, and the CPU of all N brokers per GiB. Returns {workload: metrics}."""
    name = f"cluster{cluster.nodes}-produce-1k-acksall"
    n = cfg["n_cluster"]
    res = {}
    log(f"[{tag}] {cluster.name}: start a {cluster.nodes}-node cluster")
    try:
        start_ms = cluster.start(clients, tag)
        b = cluster.bootstrap
        clients.run(["java", "-cp", clients.cp, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b,
                     "--create", "--topic", CLUSTER_TOPIC, "--partitions", str(CLUSTER_PARTITIONS),
                     "--replication-factor", str(cluster.nodes), "--config",
                     f"min.insync.replicas={CLUSTER_MIN_ISR}"], f"{tag}-{cluster.name}-cluster-create", timeout=120)
        before = describe_topic(clients, b, f"{tag}-{cluster.name}-cluster-describe-before")
        clients.producer_perf(b, "warmup", cfg["n_warmup"], 1024, "1", f"{tag}-{cluster.name}-cluster-warmup")
        pending = acks_all_refused(clients, b, f"{tag}-{cluster.name}-cluster-probe")
        if pending:
            log(f"[{tag}] {cluster.name}: acks=all refused ({pending}): replication pending, no measurement")
            return {name: {"replication_pending": 1}}
        dirty_mb, sync_s = settle_writeback()
        c0, t0 = cluster.cpu_seconds(), time.monotonic()
        m = clients.producer_perf(b, CLUSTER_TOPIC, n, 1024, "all", f"{tag}-{cluster.name}-{name}")
        m["wall_s"] = time.monotonic() - t0
        m["broker_cpu_s"] = cluster.cpu_seconds() - c0
        m["broker_cpu_s_per_gib"] = m["broker_cpu_s"] / (n * 1024 / 2**30)
        m["broker_cpu_us_per_record"] = 1e6 * m["broker_cpu_s"] / n
        m["brokers_rss_mb"] = cluster.rss_mb()
        m["cluster_start_ms"] = start_ms
        m["dirty_mb_before"], m["writeback_sync_s"] = dirty_mb, sync_s
        after = describe_topic(clients, b, f"{tag}-{cluster.name}-cluster-describe-after")
        # the ISR sizes the run ended with: replication happened if the followers stayed in sync
        isr = [len(x.split(",")) for x in re.findall(r"Isr:\s*(\S+)", after)]
        m["isr_min"] = min(isr) if isr else 0
        m["isr_max"] = max(isr) if isr else 0
        m["isr_before"] = before.count("Isr:")  # partitions listed before the run (sanity: all 6)
        res[name] = m
        log(f"[{tag}] {cluster.name} x{cluster.nodes}: {name} {m['records_per_sec']:,.0f} records/s, p50 "
            f"{m['p50_ms']:.0f} ms, p99 {m['p99_ms']:.0f} ms, brokers {m['broker_cpu_s_per_gib']:.2f} CPU s/GiB, "
            f"ISR sizes {m['isr_min']}-{m['isr_max']}")
    finally:
        cluster.stop()
        if cluster.dir:
            shutil.rmtree(cluster.dir, ignore_errors=True)
    return res


# (headline field, higher is better)
HEADLINE = {
    "produce-1k-acks1": ("records_per_sec", True),
    "produce-1k-acksall": ("records_per_sec", True),
    "produce-100b-acks1": ("records_per_sec", True),
    "produce-100b-acks1-fullbatch": ("records_per_sec", True),
    "consume-1k": ("records_per_sec", True),
    "latency-e2e-1k": ("p99_ms", False),
    "produce-1k-acks1-go": ("records_per_sec", True),
    "produce-1k-acksall-go": ("records_per_sec", True),
    "produce-100b-acks1-go": ("records_per_sec", True),
    "consume-1k-go": ("records_per_sec", True),
    "produce-1k-acksall-idem-1p-rdkafka": ("records_per_sec", True),
    "produce-1k-acks1-rdkafka": ("records_per_sec", True),
    "rss-idle": ("rss_mb", False),
    "rss-peak-under-load": ("rss_mb", False),
    "start-to-first-ack": ("ms", False),
    "partitions-10k-create": ("s", False),
    "partitions-10k-produce": ("records_per_sec", True),
    "partitions-10k-consume": ("records_per_sec", True),
    "partitions-10k-rss": ("rss_mb", False),
    "partitions-10k-fds": ("fds", False),
}


def aggregate(runs):
    """runs: {broker: [ {workload: metrics} per rep ]} -> report.json shape (medians over reps)."""
    out = {}
    for w, (field, _) in HEADLINE.items():
        entry = {}
        for b in ("sluice", "kafka"):
            reps = [r[w] for r in runs[b] if w in r]
            if not reps:
                continue
            med = {}
            for k in reps[0]:
                vals = [r[k] for r in reps if isinstance(r.get(k), (int, float)) and math.isfinite(r[k])]
                if vals:
                    med[k] = round(statistics.median(vals), 3)
            med["reps"] = [round(r[field], 3) for r in reps]
            entry[b] = med
        if "sluice" in entry and "kafka" in entry and entry["kafka"].get(field):
            entry["ratio"] = round(entry["sluice"][field] / entry["kafka"][field], 3)
        else:
            entry["ratio"] = None
        out[w] = entry
    return {"workloads": out}


# ---------------------------------------------------------------- report


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except OSError:
        return ""


def franz_go_version():
    """The franz-go version bench/go is built with (its go.mod)."""
    try:
        with open(os.path.join(ROOT, "bench", "go", "go.mod")) as f:
            m = re.search(r"github\.com/twmb/franz-go (v\S+)", f.read())
        return m.group(1) if m else ""
    except OSError:
        return ""


def librdkafka_version(binary):
    """The librdkafka version rdkafka_performance reports in its usage text ("" if unknown)."""
    if not binary:
        return ""
    out = subprocess.run([binary, "-h"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    m = re.search(r"librdkafka version (\S+)", out)
    return m.group(1) if m else ""


BALLOON_DRIVER = "/sys/bus/virtio/drivers/virtio_balloon"


def hands_free_memory_to_host():
    """Whether this machine is a VM that can give free memory back to its host: a virtio balloon device
    is bound (free page reporting goes through it). The kernel option alone (`/sys/module/page_reporting`)
    exists on bare metal too."""
    try:
        return any(e.startswith("virtio") for e in os.listdir(BALLOON_DRIVER))
    except OSError:
        return False


def machine():
    lscpu = sh("lscpu")
    model = re.search(r"Model name:\s*(.+)", lscpu)
    return {
        "nproc": str(os.cpu_count()),  # not `nproc`: the driver is pinned to the client core
        "cpu": model.group(1).strip() if model else platform.processor(),
        "mem": sh("free -h | awk '/^Mem:/{print $2}'"),
        "kernel": platform.release(),
        "java": sh("java -version 2>&1 | head -1"),
        "rustc": sh("rustc --version"),
        "go": sh("go version"),
    }


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}" if v else "0"
    return str(v)


UNITS = {"records_per_sec": "records/s", "mb_per_sec": "MB/s", "ms": "ms", "rss_mb": "MiB"}


THROUGHPUT_JAVA = ["produce-1k-acks1", "produce-1k-acksall", "produce-100b-acks1", "produce-100b-acks1-fullbatch",
                   "consume-1k"]
THROUGHPUT_GO = ["produce-1k-acks1-go", "produce-1k-acksall-go", "produce-100b-acks1-go", "consume-1k-go"]
THROUGHPUT_RDKAFKA = [name for name, *_ in RDKAFKA_WORKLOADS]
THROUGHPUT = THROUGHPUT_JAVA + THROUGHPUT_GO + THROUGHPUT_RDKAFKA

# (label, field, format) rows of the client-bound tables; rows missing on every side are left out
CPU_ROWS = [
    ("records/s", "records_per_sec", "{:,.0f}"),
    ("client JVM, % of its core (measured phase)", "client_jvm_pct_of_core", "{:.0f}"),
    ("client process (Go), % of its core (its getrusage over the measured phase)", "client_pct_of_core", "{:.0f}"),
    ("client core busy, % (every process on CPU 1)", "client_core_busy_pct", "{:.0f}"),
    ("client CPU, µs per record", "client_cpu_us_per_record", "{:.2f}"),
    ("- application thread (send() / poll loop)", "client_app_cpu_us_per_record", "{:.2f}"),
    ("- network (sender) thread", "client_network_cpu_us_per_record", "{:.2f}"),
    ("- GC threads", "client_gc_cpu_us_per_record", "{:.2f}"),
    ("- JIT compiler threads", "client_jit_cpu_us_per_record", "{:.2f}"),
    ("- other threads", "client_other_cpu_us_per_record", "{:.2f}"),
    ("client JVM CPU in the measured phase (sampled), s", "client_cpu_s", "{:.2f}"),
    ("client CPU in its measured phase, its own count (JVM poll loop; Go getrusage), s", "client_process_cpu_s",
     "{:.2f}"),
    ("client CPU, whole life incl. start-up, s", "client_cpu_total_s", "{:.2f}"),
    ("producer batch-size-avg, bytes", "producer_batch_size_avg", "{:,.0f}"),
    ("producer records-per-request-avg", "producer_records_per_request_avg", "{:,.0f}"),
    ("producer records per batch (Go: franz-go hooks)", "records_per_batch_avg", "{:,.0f}"),
    ("producer requests (request-total)", "producer_request_total", "{:,.0f}"),
    ("producer requests per second (request-total / run time)", "producer_requests_per_sec", "{:,.0f}"),
    ("producer request-size-avg, bytes", "producer_request_size_avg", "{:,.0f}"),
    ("producer request-latency-avg, ms", "producer_request_latency_avg", "{:.2f}"),
    ("producer record-queue-time-avg, ms", "producer_record_queue_time_avg", "{:.2f}"),
    ("producer sender thread waiting in select, share of the run (io-wait-time-ns-total)", "producer_io_wait_share",
     "{:.3f}"),
    ("producer send() blocked on buffer memory, share of the run (bufferpool-wait-time-ns-total)",
     "producer_bufferpool_wait_share", "{:.3f}"),
    ("consumer fetch-size-avg, KiB", "fetch_size_avg_kib", "{:,.0f}"),
    ("consumer records-per-request-avg", "records_per_request_avg", "{:,.0f}"),
    ("consumer fetches", "fetches", "{:,.0f}"),
    ("consumer fetches per second (fetch-total / poll loop time)", "fetches_per_sec", "{:.1f}"),
    ("consumer fetch-latency-avg, ms", "fetch_latency_avg_ms", "{:.1f}"),
    ("consumer waiting in select, share of the poll loop (io-wait-time-ns-total)", "io_wait_share", "{:.3f}"),
    ("broker process, % of its core (measured phase)", "broker_pct_of_core", "{:.0f}"),
    ("broker core busy, % (every process on CPU 0)", "broker_core_busy_pct", "{:.0f}"),
    ("broker CPU, µs per record (whole workload)", "broker_cpu_us_per_record", "{:.2f}"),
    ("broker CPU, s per GiB (whole workload)", "broker_cpu_s_per_gib", "{:.2f}"),
]

SATURATED_PCT = 90.0  # a client JVM at or above this share of its core is counted as client-bound


def _num(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def client_name(w):
    return "Go (franz-go)" if w in THROUGHPUT_GO else "librdkafka" if w in THROUGHPUT_RDKAFKA else "Java"


def client_pct_field(w):
    """The client's share of its core: sampled JVM threads (Java workloads) or the Go process's getrusage."""
    return "client_pct_of_core" if w in THROUGHPUT_GO + THROUGHPUT_RDKAFKA else "client_jvm_pct_of_core"


def bound_by(d, w):
    """'client-bound', 'broker-bound', 'both saturated', 'neither saturated' or 'cores contended' for one side
    of a workload, from the client's and the broker process's share of their cores over the measured phase
    ('cores contended': neither process saturated its core but a core was busy anyway, with other
    processes); None if a figure is missing."""
    c, b = d.get(client_pct_field(w)), d.get("broker_pct_of_core")
    if not (_num(c) and _num(b)):
        return None
    if c >= SATURATED_PCT and b >= SATURATED_PCT:
        return "both saturated"
    if c >= SATURATED_PCT:
        return "client-bound"
    if b >= SATURATED_PCT:
        return "broker-bound"
    if any(_num(d.get(f)) and d[f] >= SATURATED_PCT for f in ("client_core_busy_pct", "broker_core_busy_pct")):
        return "cores contended"
    return "neither saturated"


def bound_sentence(w, e):
    """One sentence on which side bounded the throughput ratio of w."""
    s, k = e.get("sluice", {}), e.get("kafka", {})
    bs, bk = bound_by(s, w), bound_by(k, w)
    if bs is None or bk is None:
        return None
    if "cores contended" in (bs, bk):
        verdict = ("other processes kept a core busy while neither the client nor the broker saturated it, so "
                   "this ratio says little about either broker")
    elif bs == bk == "client-bound":
        verdict = "both runs are client-bound: the ratio is the client's, not the brokers'"
    elif bs == bk == "broker-bound":
        verdict = "both runs are broker-bound: the ratio compares the brokers' capacity"
    elif bk in ("broker-bound", "both saturated") and bs in ("client-bound", "neither saturated"):
        verdict = ("Kafka's broker saturated its core and Sluice's did not: the ratio is a lower bound of Sluice's "
                   "broker capacity relative to Kafka's")
    elif bs in ("broker-bound", "both saturated") and bk in ("client-bound", "neither saturated"):
        verdict = "Sluice's broker saturated its core and Kafka's did not"
    elif bs == bk == "neither saturated":
        verdict = ("neither core was saturated on either side: the client waited for answers, so the ratio "
                   "reflects answer latency and pipelining, not CPU capacity")
    else:
        verdict = "the two runs were bound by different things, so the ratio mixes client and broker limits"
    return (f"Against Sluice the client used {s[client_pct_field(w)]:.0f}% of its core and the broker "
            f"{s['broker_pct_of_core']:.0f}% of its ({bs}); against Kafka {k[client_pct_field(w)]:.0f}% and "
            f"{k['broker_pct_of_core']:.0f}% ({bk}); {verdict} (saturated = >= {SATURATED_PCT:.0f}% of one core).")


def explain(w, e, sink):
    """Statements about one workload, each one a measured value (or a ratio of two); None if data is missing."""
    s, k = e.get("sluice", {}), e.get("kafka", {})
    pf = client_pct_field(w)
    need = ("records_per_sec", pf, "client_cpu_us_per_record")
    if not all(_num(s.get(f)) and _num(k.get(f)) for f in need):
        return None
    ratio = s["records_per_sec"] / k["records_per_sec"]
    sp, kp = s[pf], k[pf]
    sp_kp = {"Sluice": sp, "Kafka": kp}
    su, ku = s["client_cpu_us_per_record"], k["client_cpu_us_per_record"]
    out = [f"throughput Sluice/Kafka {ratio:.2f} ({s['records_per_sec']:,.0f} vs {k['records_per_sec']:,.0f} "
           f"records/s)."]
    bound = bound_sentence(w, e)
    if bound:
        out.append(bound)
    else:
        out.append(f"Client: {sp:.0f}% of its core against Sluice, {kp:.0f}% against Kafka.")
    out.append(f"Client CPU per record: {su:.2f} µs against Sluice, {ku:.2f} µs against Kafka (Sluice/Kafka "
               f"{su / ku:.2f}). Records/s = client CPU share / CPU per record, so the throughput ratio splits into "
               f"{sp / kp:.2f} (client busy share) x {ku / su:.2f} (Kafka/Sluice client CPU per record).")
    parts = []
    for label, f in (("application thread", "client_app_cpu_us_per_record"),
                     ("network thread", "client_network_cpu_us_per_record"),
                     ("GC", "client_gc_cpu_us_per_record"), ("JIT", "client_jit_cpu_us_per_record")):
        if _num(s.get(f)) and _num(k.get(f)):
            parts.append(f"{label} {s[f]:.2f} vs {k[f]:.2f}")
    if parts:
        out.append("Split, µs per record Sluice vs Kafka: " + ", ".join(parts) + ".")
    go_client = w in THROUGHPUT_GO + THROUGHPUT_RDKAFKA
    if go_client and _num(s.get("producer_records_per_request_avg")) and _num(k.get("producer_records_per_request_avg")):
        out.append(f"Produce requests carried {s['producer_records_per_request_avg']:,.0f} vs "
                   f"{k['producer_records_per_request_avg']:,.0f} records at {s.get('producer_requests_per_sec', 0):,.0f} vs "
                   f"{k.get('producer_requests_per_sec', 0):,.0f} requests/s (batches of "
                   f"{s.get('producer_batch_size_avg', 0):,.0f} vs {k.get('producer_batch_size_avg', 0):,.0f} B).")
    if go_client and _num(s.get("records_per_request_avg")) and _num(k.get("records_per_request_avg")):
        out.append(f"Fetch requests returned {s['records_per_request_avg']:,.0f} vs {k['records_per_request_avg']:,.0f} "
                   f"records each, {s.get('fetches_per_sec', 0):,.1f} vs {k.get('fetches_per_sec', 0):,.1f} per second.")
    if not go_client and _num(s.get("producer_records_per_request_avg")) and _num(k.get("producer_records_per_request_avg")):
        line = (f"Produce requests carried {s['producer_records_per_request_avg']:,.0f} vs "
                f"{k['producer_records_per_request_avg']:,.0f} records (batch-size-avg "
                f"{s.get('producer_batch_size_avg', float('nan')):,.0f} vs {k.get('producer_batch_size_avg', float('nan')):,.0f} B) "
                f"at {s.get('producer_requests_per_sec', float('nan')):,.0f} vs {k.get('producer_requests_per_sec', float('nan')):,.0f} "
                f"requests/s; request-latency-avg {s.get('producer_request_latency_avg', float('nan')):.1f} vs "
                f"{k.get('producer_request_latency_avg', float('nan')):.1f} ms, record-queue-time-avg "
                f"{s.get('producer_record_queue_time_avg', float('nan')):.1f} vs "
                f"{k.get('producer_record_queue_time_avg', float('nan')):.1f} ms; the sender thread waited in select "
                f"{s.get('producer_io_wait_share', float('nan')):.1%} vs {k.get('producer_io_wait_share', float('nan')):.1%} "
                f"of the run, send() blocked on buffer memory {s.get('producer_bufferpool_wait_share', float('nan')):.1%} vs "
                f"{k.get('producer_bufferpool_wait_share', float('nan')):.1%}.")
        out.append(line)
    if not go_client and _num(s.get("records_per_request_avg")) and _num(k.get("records_per_request_avg")):
        out.append(f"Fetch responses carried {s['records_per_request_avg']:,.0f} vs {k['records_per_request_avg']:,.0f} "
                   f"records ({s.get('fetch_size_avg_kib', 0):,.0f} vs {k.get('fetch_size_avg_kib', 0):,.0f} KiB), "
                   f"fetch-latency-avg {s.get('fetch_latency_avg_ms', 0):.1f} vs {k.get('fetch_latency_avg_ms', 0):.1f} ms, "
                   f"the consumer waited in select for {s.get('io_wait_share', 0):.1%} vs {k.get('io_wait_share', 0):.1%} "
                   "of its poll loop.")
    for name, d in (("Sluice", s), ("Kafka", k)):
        if _num(d.get("broker_core_busy_pct")) and _num(d.get("broker_pct_of_core")) \
                and d["broker_core_busy_pct"] - d["broker_pct_of_core"] > 20:
            out.append(f"Caution: during the {name} run the broker core was {d['broker_core_busy_pct']:.0f}% busy "
                       f"but the broker process used {d['broker_pct_of_core']:.0f}%: other processes ran there.")
        if _num(d.get("client_core_busy_pct")) and d["client_core_busy_pct"] - sp_kp[name] > 20:
            out.append(f"Caution: during the {name} run the client core was {d['client_core_busy_pct']:.0f}% busy "
                       f"but the client used {sp_kp[name]:.0f}%: other processes ran there.")
    sb, kb = s.get("broker_cpu_us_per_record"), k.get("broker_cpu_us_per_record")
    if _num(sb) and _num(kb) and sb > 0:
        out.append(f"Broker CPU: {sb:.2f} vs {kb:.2f} µs per record, {s.get('broker_cpu_s_per_gib', 0):.2f} vs "
                   f"{k.get('broker_cpu_s_per_gib', 0):.2f} CPU s per GiB (Kafka/Sluice {kb / sb:.1f}).")
    if w in sink and _num(sink[w].get("client_cpu_us_per_record")):
        d = sink[w]
        out.append(f"Against the sink: {d['records_per_sec']:,.0f} records/s, client {d.get('client_jvm_pct_of_core', 0):.0f}% "
                   f"of its core, {d['client_cpu_us_per_record']:.2f} µs per record, "
                   f"{d.get('producer_records_per_request_avg', 0):,.0f} records per request.")
    return out


def cpu_sections(W, meta):
    sink = meta.get("sink_detail") or {}
    L = ["## Client-bound check: where the CPU goes", ""]
    L.append("Measured, not assumed: every client JVM's threads are read from `/proc/PID/task/*/stat` every "
             "100 ms, together with the busy time of both cores (`/proc/stat`) and the broker's CPU. The "
             "*measured phase* is the client's own clock (ProducerPerformance: records / its rate; BenchClient "
             "consume: its poll loop), taken as the last that many seconds of the JVM's life. `% of its core` = "
             "JVM CPU seconds in that phase / its length (one pinned core, so 100% = saturated). CPU per record "
             "= CPU in the phase / records in it. Producer and consumer figures are the clients' own metrics "
             "(ProducerPerformance `--print-metrics`, KafkaConsumer `metrics()`). Broker CPU per record and per "
             "GiB are over the whole workload (client start-up included). The Go client's (`*-go`) share of its "
             "core is its own getrusage (utime+stime) over its measured phase; it runs with GOMAXPROCS=1. The "
             "broker's share is its utime+stime over the same window, sampled from `/proc`.")
    L.append("")
    L.append(f"### Who bounded each run (saturated = >= {SATURATED_PCT:.0f}% of one core)")
    L.append("")
    L.append("| workload | client | vs Sluice: client % / broker % | bound | vs Kafka: client % / broker % | bound | "
             "Sluice / Kafka |")
    L.append("|---|---|---|---|---|---|---|")
    for w in THROUGHPUT:
        e = W.get(w, {})
        s, k = e.get("sluice", {}), e.get("kafka", {})
        if not s and not k:
            continue
        pf = client_pct_field(w)
        cells = [f"{d[pf]:.0f} / {d['broker_pct_of_core']:.0f}" if _num(d.get(pf)) and _num(d.get("broker_pct_of_core"))
                 else "-" for d in (s, k)]
        L.append(f"| {w} | {client_name(w)} | {cells[0]} | {bound_by(s, w) or '-'} | "
                 f"{cells[1]} | {bound_by(k, w) or '-'} | {fmt(e.get('ratio'))} |")
    L.append("")
    for w in THROUGHPUT:
        e = W.get(w, {})
        if "sluice" not in e and "kafka" not in e:
            continue
        cols = [("sluice", e.get("sluice", {})), ("kafka", e.get("kafka", {}))]
        if w in sink:
            cols.append(("sink", sink[w]))
        L.append(f"### {w}")
        L.append("")
        L.append("| measure | " + " | ".join(c for c, _ in cols) + " |")
        L.append("|---|" + "---|" * len(cols))
        for label, f, fm in CPU_ROWS:
            vals = [d.get(f) for _, d in cols]
            if not any(_num(v) for v in vals):
                continue
            L.append(f"| {label} | " + " | ".join(fm.format(v) if _num(v) else "-" for v in vals) + " |")
        L.append("")
        ex = explain(w, e, sink)
        if ex:
            L.append("From these numbers: " + " ".join(ex))
            L.append("")
    L.append("## Broker efficiency: CPU per GiB and per record")
    L.append("")
    L.append("Where the client, not the broker, bounds throughput, the broker's CPU for the same work is the "
             "comparison that says which broker is faster. utime+stime of the broker process over each workload.")
    L.append("")
    L.append("| workload | sluice CPU s/GiB | kafka CPU s/GiB | kafka / sluice | sluice µs/record | kafka µs/record |")
    L.append("|---|---|---|---|---|---|")
    for w in THROUGHPUT + ["latency-e2e-1k"]:
        s, k = W.get(w, {}).get("sluice", {}), W.get(w, {}).get("kafka", {})
        sg, kg = s.get("broker_cpu_s_per_gib"), k.get("broker_cpu_s_per_gib")
        if not (_num(sg) and _num(kg)):
            continue
        L.append(f"| {w} | {sg:.2f} | {kg:.2f} | {fmt(kg / sg) if sg else '-'} | "
                 f"{s.get('broker_cpu_us_per_record', 0):.2f} | {k.get('broker_cpu_us_per_record', 0):.2f} |")
    si = W.get("rss-idle", {})
    if _num(si.get("sluice", {}).get("idle_cpu_pct_of_core")) and _num(si.get("kafka", {}).get("idle_cpu_pct_of_core")):
        L.append("")
        L.append(f"Idle CPU (after the first ack, no clients): Sluice {si['sluice']['idle_cpu_pct_of_core']:.1f}%, "
                 f"Kafka {si['kafka']['idle_cpu_pct_of_core']:.1f}% of a core; charged to every workload above "
                 "for the seconds its client JVM starts and closes.")
    L.append("")
    return L


def write_report(path, data, meta):
    W = data["workloads"]
    L = []
    L.append("# Sluice vs Apache Kafka: side-by-side benchmark")
    L.append("")
    L.append(f"Date: {meta['date']}. Mode: {'--quick' if meta['quick'] else 'full'}, {meta['reps']} repetition(s), "
             "medians over repetitions. Generated by `scripts/bench`.")
    if meta.get("load_before") and meta.get("load_after"):
        L.append("")
        busy = max(meta["load_before"][0], meta["load_after"][0]) > (os.cpu_count() or 1)
        L.append(f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in meta['load_before'])}; after: "
                 f"{', '.join(f'{x:.2f}' for x in meta['load_after'])}"
                 + (f" (above the {os.cpu_count()} CPUs: other processes shared the pinned cores, so throughput "
                    "figures are the scheduler's as much as the brokers')." if busy else "."))
    if meta.get("note"):
        L.append("")
        L.append(f"**{meta['note']}**")
    L.append("")
    L.append("## Summary")
    L.append("")
    L.append("Ratio = Sluice / Kafka on the headline figure. Throughput: higher is better (ratio > 1 = Sluice "
             "faster). Latency, RSS, start time: lower is better (ratio < 1 = Sluice better).")
    L.append("")
    L.append("| workload | headline | sluice | kafka | ratio | better |")
    L.append("|---|---|---|---|---|---|")
    for w, (field, higher) in HEADLINE.items():
        e = W.get(w, {})
        s, k = e.get("sluice", {}).get(field), e.get("kafka", {}).get(field)
        r = e.get("ratio")
        better = "-"
        if r is not None:
            better = "sluice" if (r > 1) == higher and r != 1 else ("kafka" if r != 1 else "tie")
        L.append(f"| {w} | {field} ({'higher' if higher else 'lower'} is better) | {fmt(s)} | {fmt(k)} | "
                 f"{fmt(r)} | {better} |")
    L.append("")
    L.append("Two clients. The Java ones (Kafka's ProducerPerformance, `bench/java/BenchClient`) are the standard "
             "workloads of the design's testing.md, but on one core they need more CPU per record than either "
             "broker, so they bound throughput against both. The `*-go` workloads run the same shapes with a small "
             "franz-go client (`bench/go`, GOMAXPROCS=1, same core) that needs about 1 µs of CPU per record, a "
             "tenth of the Java client's and about what Sluice's broker needs, so the broker's own capacity can "
             "show (Kafka's broker saturates first). The table \"Who bounded each run\" below says, from "
             "the measured CPU shares, which side was the limit in each run.")
    L.append("")
    if meta.get("sink"):
        L.append("### Client ceiling: the same ProducerPerformance against a sink that stores nothing")
        L.append("")
        L.append("`bench/java/BenchSink` (kafka-clients' own message classes, one thread per connection, pinned "
                 "to the broker core) acknowledges every produce without storing it. A broker near this figure is "
                 "limited by the client, not by itself. Not a strict bound: the sink is itself a JVM on the broker "
                 "core, so a lean broker can beat it.")
        L.append("")
        L.append("| workload | sink records/s | sink MB/s | sluice / sink | kafka / sink |")
        L.append("|---|---|---|---|---|")
        for w, v in meta["sink"].items():
            sv = W.get(w, {}).get("sluice", {}).get("records_per_sec")
            kv = W.get(w, {}).get("kafka", {}).get("records_per_sec")
            L.append(f"| {w} | {fmt(v['records_per_sec'])} | {fmt(v['mb_per_sec'])} | "
                     f"{fmt(sv / v['records_per_sec'] if sv else None)} | {fmt(kv / v['records_per_sec'] if kv else None)} |")
        L.append("")
    L.extend(cpu_sections(W, meta))
    L.append("## Per workload")
    for w in HEADLINE:
        e = W.get(w, {})
        if "sluice" not in e and "kafka" not in e:
            continue
        L.append("")
        L.append(f"### {w}")
        L.append("")
        L.append("| metric | sluice | kafka | sluice/kafka |")
        L.append("|---|---|---|---|")
        keys = [k for k in e.get("sluice", e.get("kafka", {})) if k != "reps"]
        for k in keys:
            s, kk = e.get("sluice", {}).get(k), e.get("kafka", {}).get(k)
            ratio = s / kk if isinstance(s, (int, float)) and isinstance(kk, (int, float)) and kk else None
            L.append(f"| {k} | {fmt(s)} | {fmt(kk)} | {fmt(ratio)} |")
        L.append(f"| reps ({HEADLINE[w][0]}) | {e.get('sluice', {}).get('reps')} | {e.get('kafka', {}).get('reps')} | |")
    L.append("")
    L.append("## Setup")
    L.append("")
    c = meta["cfg"]
    m = meta["machine"]
    L.append(f"- Machine: {m['nproc']} CPUs ({m['cpu']}), {m['mem']} RAM, Linux {m['kernel']}; {m['java']}; {m['rustc']}; {m.get('go', '')}.")
    L.append(f"- Pinning: broker on CPU {BROKER_CPU}, every client JVM on CPU {CLIENT_CPU} (`taskset -c`). "
             "Kafka's JVM (GC and all) is confined to the same single core as Sluice.")
    L.append("- Durability: neither broker fsyncs per write. Kafka: `log.flush.interval.messages` = Long.MAX "
             "(its default; flushes left to the OS). Sluice: default `log.flush.interval.messages` (no fsync before "
             "acknowledging; rolled segments fsynced by a background thread, everything at shutdown). "
             "Single node, replication factor 1, so acks=all = "
             "acks=1 plus (for Java's default) the idempotent producer.")
    if meta.get("free_memory_to_host"):
        L.append("- Guest memory: this machine is a VM with a balloon device, through which its kernel gives free "
                 "memory back to the host (free page reporting). The first write to a page the host took back costs a host fault, so a produce whose "
                 "page-cache pages land there needs several times the kernel CPU (see README, Performance): the "
                 "main source of run-to-run noise in produce throughput and broker CPU. It affects both brokers; "
                 "compare repetitions.")
    L.append("- Page cache: before every measured workload the driver runs `sync`, so each starts with no dirty "
             "pages whatever the workload before it wrote (`dirty_mb_before`, `writeback_sync_s` per workload; "
             "neither is in a measured phase). Without it a produce run that follows gigabytes of unwritten data "
             "meets the kernel's dirty-page throttling and its figure depends on the workload order.")
    L.append(f"- Kafka {meta.get('kafka_version', '4.1.2')}, KRaft combined mode, from Maven jars "
             "(`scripts/kafka-reference`), `-Xms256m -Xmx1g -XX:+UseG1GC`. Sluice: `target/release/sluice serve` with defaults, fresh data dir.")
    L.append("- Clients: kafka-clients 4.1.2 (Kafka's own jars) for both brokers, JVM `-Xmx1g`.")
    L.append(f"- produce-*: `org.apache.kafka.tools.ProducerPerformance --throughput -1`, linger.ms=5, "
             f"batch.size=131072, 6 partitions; {c['n_1k']:,} x 1 KiB records (acks=1 and acks=all), "
             f"{c['n_100b']:,} x 100 B records (acks=1). Latency columns are ProducerPerformance's (send to ack, ms).")
    L.append(f"- produce-100b-acks1-fullbatch: the 100 B workload with linger.ms={LINGER_FULL_MS} (a diagnostic): "
             "batches fill to batch.size before they are sent whatever the broker's answer time, so both brokers "
             "get requests of the same size and the client does the same work per record; it tests whether the "
             "100 B gap comes from batching.")
    L.append("- Client CPU: the client JVM's threads (`/proc/PID/task/*/stat`: `main` = application thread, "
             "`kafka-producer-network-thread` = sender, GC, JIT compiler, other) and both cores' busy time "
             "(`/proc/stat`) sampled every 100 ms by the driver (itself on the client core: a few % of it); see "
             "the client-bound section for the measured-phase window. `client_cpu_total_s` is the JVM's whole "
             "life from its rusage (start-up and JIT warm-up included).")
    L.append(f"- *-go: `bench/go` (benchgo, franz-go {meta.get('franz_go', '')}), `GOMAXPROCS=1`, on the client "
             f"core. produce: {c['n_go_1k']:,} x 1 KiB (acks=1, acks=all) and {c['n_go_100b']:,} x 100 B (acks=1), "
             "unkeyed, linger 5 ms, batches up to 128 KiB, sticky partitioning per 128 KiB, no compression, up to "
             "32 MiB buffered; acks=all is idempotent (as Java's default), acks=1 is not (franz-go allows "
             "idempotence only with acks=all) and keeps 5 requests in flight per broker (Java's default). Latency "
             "columns: produce call to acknowledgement, every record. consume-1k-go: direct assignment of the 6 "
             "partitions of produce-1k-acks1-go's topic from the start (no group), fetch.max.bytes 50 MiB, 1 MiB "
             "per partition, max wait 500 ms (the Java consumer's defaults), until all records are read. "
             "They run after every Java workload on the same broker process.")
    L.append(f"- *-rdkafka: librdkafka {meta.get('librdkafka', '')}'s `rdkafka_performance -P` (built by "
             f"`scripts/librdkafka`), on the client core, {c.get('n_rdk', 0):,} x 1 KiB records, each workload on a "
             "broker started fresh for it (empty data dir, deleted after). produce-1k-acksall-idem-1p-rdkafka: "
             "`-p 0 -a -1 -X enable.idempotence=true` to a 1-partition topic; produce-1k-acks1-rdkafka: `-a 1` to "
             "a 6-partition topic (librdkafka's sticky partitioner). librdkafka's defaults otherwise (linger.ms 5, "
             "batch.size 1 MB; 5 requests in flight when idempotent). records/s = delivered records / its own "
             "clock (first produce to last delivery report); `broker_user_s` / `broker_sys_s` split the broker's "
             "CPU; `broker_runqueue_wait_s` is the time its threads were runnable but waited for a CPU "
             "(`/proc/PID/task/*/schedstat`: other processes on its core); `memfree_mb_before` is MemFree "
             "before the run (see Guest memory above).")
    L.append(f"- consume-1k: `bench/java/BenchClient consume`: assign() all 6 partitions of the acks=1 1 KiB "
             f"topic, seekToBeginning, poll until all {c['n_1k']:,} records are read (no consumer group: Sluice "
             "has none yet; Kafka's ConsumerPerformance needs one).")
    L.append(f"- latency-e2e-1k: `BenchClient latency`: one producer (acks=1, linger.ms=0) at a fixed "
             f"{c['lat_rate']} records/s of {c['lat_size']} B for {c['lat_secs']} s (after {c['lat_warmup']} s "
             "warm-up, discarded), one assign() consumer (default fetch.max.wait.ms=500, so the broker's long-poll "
             "wake-up is on the path) on a 1-partition topic; latency = consume time - send time, same JVM clock. "
             "Kafka's EndToEndLatency is one-record-at-a-time with whole-millisecond resolution, hence our own.")
    L.append("- start-to-first-ack: the driver (Python, on the client core) launches the broker process "
             "(`taskset -c 0 ...`) and loops raw-wire requests: connect, Metadata v4 (auto-creates the topic), "
             "Produce v3 acks=1 of one 16 B record; the clock stops at the first error-free Produce response. "
             "A raw prober, because a fresh JVM client spends 0.4-1.3 s loading its own send path. `listen_ms` "
             "is the first accepted TCP connection. Kafka's storage is formatted beforehand (a separate KRaft "
             "admin step, untimed) and its timed start goes through `scripts/kafka-reference start --keep-data` "
             "(bash, a few ms).")
    L.append("- rss-idle: VmRSS a few seconds after the first ack. Per-workload `rss_peak_mb` is VmHWM after the "
             "workload (reset through /proc/PID/clear_refs before it), `rss_load_mb` the median VmRSS sampled "
             "every 200 ms during it; `broker_cpu_s` is utime+stime of the broker process during the workload. "
             "rss-peak-under-load = the largest per-workload VmHWM.")
    L.append("- Repetitions alternate the broker order (A/B, B/A, ...). Each broker starts fresh once per "
             f"repetition, takes an untimed warm-up ({c['n_warmup']:,} x 1 KiB, acks=1, its own topic) and then "
             "runs all workloads in the order listed. MB/s is MiB/s (ProducerPerformance's convention)."
             + (" In --quick, the sink runs in the first repetition only, and partitions-10k only with --p10k "
                "(then in the first repetition only): their `reps` lists have one entry." if meta["quick"] else ""))
    L.append(f"- partitions-10k-*: each broker is restarted fresh (empty data dir) for this workload. "
             f"`BenchClient create-topic`: one topic of {c['p10k_partitions']:,} partitions, created with "
             f"{c['p10k_step']:,} partitions and grown by CreatePartitions in steps of {c['p10k_step']:,} (Kafka's "
             "controller refuses one operation of more than 10,000 records); `s` = until the metadata shows every "
             "partition with a leader, `create_s` = the admin calls alone. `BenchClient produce-rr`: "
             f"{c['p10k_per_partition']} x {c['p10k_size']} B records per partition, record i to partition i mod "
             f"{c['p10k_partitions']:,} (acks=1, linger.ms=5, batch.size=16384, buffer.memory=256 MiB). "
             "`BenchClient consume`: assign() all partitions, seekToBeginning, read every record. After idle, "
             "create, produce and consume: the broker's open descriptors (`ls /proc/PID/fd`), VmRSS and memory "
             "mappings (`/proc/PID/maps`: Kafka mmaps its index files). partitions-10k-fds = the most descriptors "
             "seen after any phase; `fd_soft_limit` = the process's RLIMIT_NOFILE (both inherit the shell's; "
             "Sluice bounds its segment descriptors by `sluice.log.open.files.max`, default 512). "
             "partitions-10k-rss = VmRSS after the consume phase.")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def charts(outdir, data, sink):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no charts")
        return
    W = data["workloads"]
    colors = {"sluice": "#1f77b4", "kafka": "#ff7f0e"}

    def bars(ax, groups, field, title, ylabel, with_sink=False):
        xs = range(len(groups))
        for i, b in enumerate(("sluice", "kafka")):
            vals = [W.get(g, {}).get(b, {}).get(field, 0) or 0 for g in groups]
            ax.bar([x + (i - 0.5) * 0.38 for x in xs], vals, 0.38, label=b, color=colors[b])
        if with_sink and sink:
            for x, g in zip(xs, groups):
                if g in sink:
                    ax.hlines(sink[g][field], x - 0.4, x + 0.4, colors="black", linestyles="dashed",
                              label="sink (client ceiling)" if x == 0 else None)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(groups, rotation=25, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend()

    tw = THROUGHPUT
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for row, (groups, client) in enumerate(((THROUGHPUT_JAVA, "Java client"),
                                            (THROUGHPUT_GO + THROUGHPUT_RDKAFKA, "franz-go and librdkafka"))):
        bars(axes[row][0], groups, "records_per_sec", f"Throughput, {client} (records/s)", "records/s", True)
        bars(axes[row][1], groups, "mb_per_sec", f"Throughput, {client} (MB/s)", "MB/s", True)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "throughput.png"), dpi=100)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    lat = W.get("latency-e2e-1k", {})
    qs = ["p50_ms", "p99_ms", "p999_ms"]
    for i, b in enumerate(("sluice", "kafka")):
        axes[0].bar([x + (i - 0.5) * 0.38 for x in range(3)], [lat.get(b, {}).get(q, 0) for q in qs], 0.38,
                    label=b, color=colors[b])
    axes[0].set_xticks(range(3))
    axes[0].set_xticklabels(["p50", "p99", "p99.9"])
    axes[0].set_title("End-to-end latency at a fixed rate (ms)")
    axes[0].legend()
    produce = [w for w in THROUGHPUT if w.startswith("produce-")]
    bars(axes[1], produce, "p99_ms", "Producer p99 send-to-ack (ms, saturated; *-go: franz-go)", "ms")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "latency.png"), dpi=100)
    plt.close(fig)

    # CPU: the client's per record (is the client the limit?) and the broker's per GiB (efficiency)
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    xs = range(len(tw))
    series = [("sluice", W), ("kafka", W)]
    width = 0.27
    for i, (b, _) in enumerate(series):
        axes[0].bar([x + (i - 1) * width for x in xs],
                    [W.get(g, {}).get(b, {}).get("client_cpu_us_per_record", 0) or 0 for g in tw], width,
                    label=f"client vs {b}", color=colors[b])
    if sink:
        axes[0].bar([x + width for x in xs], [sink.get(g, {}).get("client_cpu_us_per_record", 0) or 0 for g in tw],
                    width, label="client vs sink", color="#999999")
    axes[0].set_xticks(list(xs))
    axes[0].set_xticklabels(tw, rotation=25, ha="right", fontsize=7)
    axes[0].set_title("Client CPU per record (µs, measured phase; *-go: franz-go)")
    axes[0].legend()
    bars(axes[1], tw, "broker_cpu_s_per_gib", "Broker CPU seconds per GiB", "CPU s / GiB")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "cpu.png"), dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(12, 4.5))
    groups = ["rss-idle"] + tw + ["latency-e2e-1k"]
    for i, b in enumerate(("sluice", "kafka")):
        vals = [W.get("rss-idle", {}).get(b, {}).get("rss_mb", 0)] + \
               [W.get(g, {}).get(b, {}).get("rss_peak_mb", 0) for g in groups[1:]]
        ax.bar([x + (i - 0.5) * 0.38 for x in range(len(groups))], vals, 0.38, label=b, color=colors[b])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(["idle"] + groups[1:], rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("MiB")
    ax.set_title("Broker RSS: idle, and peak (VmHWM) per workload")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "rss.png"), dpi=100)
    plt.close(fig)


CLUSTER_ROWS = [
    ("records/s", "records_per_sec", "{:,.0f}"),
    ("MB/s", "mb_per_sec", "{:.1f}"),
    ("produce latency p50, ms (send to ack)", "p50_ms", "{:.0f}"),
    ("produce latency p99, ms", "p99_ms", "{:.0f}"),
    ("produce latency p99.9, ms", "p999_ms", "{:.0f}"),
    ("all brokers' CPU, s per GiB", "broker_cpu_s_per_gib", "{:.2f}"),
    ("all brokers' CPU, µs per record", "broker_cpu_us_per_record", "{:.2f}"),
    ("all brokers' RSS after the run, MiB", "brokers_rss_mb", "{:,.0f}"),
    ("client JVM, % of its core (measured phase)", "client_jvm_pct_of_core", "{:.0f}"),
    ("broker core busy, % (all brokers on CPU 0)", "broker_core_busy_pct", "{:.0f}"),
    ("producer records-per-request-avg", "producer_records_per_request_avg", "{:,.0f}"),
    ("producer request-latency-avg, ms", "producer_request_latency_avg", "{:.1f}"),
    ("smallest ISR after the run (of RF)", "isr_min", "{:.0f}"),
    ("cluster start until every broker is registered, ms", "cluster_start_ms", "{:,.0f}"),
]


def write_cluster_report(path, runs, meta):
    """bench/cluster-N/report.md: the --cluster workload side by side, every repetition kept."""
    n, w = meta["nodes"], meta["workload"]
    L = [f"# {n} brokers: Sluice vs Apache Kafka, RF {n}, acks=all", ""]
    L.append(f"Date: {meta['date']}. {meta['reps']} repetition(s), medians (every repetition below). Generated by "
             f"`scripts/bench --cluster {n}`. Load average before: {', '.join(f'{x:.2f}' for x in meta['load_before'])}; "
             f"after: {', '.join(f'{x:.2f}' for x in meta['load_after'])}.")
    if meta.get("note"):
        L += ["", f"**{meta['note']}**"]
    L += ["", "| measure | sluice | kafka | sluice / kafka |", "|---|---|---|---|"]
    med = {}
    for b in ("sluice", "kafka"):
        reps = [r[w] for r in runs.get(b, []) if w in r]
        med[b] = {k: statistics.median(r[k] for r in reps if _num(r.get(k))) for k in (reps[0] if reps else {})
                  if any(_num(r.get(k)) for r in reps)}
    for label, f, fm in CLUSTER_ROWS:
        sv, kv = med["sluice"].get(f), med["kafka"].get(f)
        if not (_num(sv) or _num(kv)):
            continue
        ratio = fmt(sv / kv) if _num(sv) and _num(kv) and kv else "-"
        L.append(f"| {label} | {fm.format(sv) if _num(sv) else '-'} | {fm.format(kv) if _num(kv) else '-'} | {ratio} |")
    reps = {b: ", ".join(f"{r[w]['records_per_sec']:,.0f}" if "records_per_sec" in r[w] else "replication pending"
                         for r in runs.get(b, []) if w in r) for b in ("sluice", "kafka")}
    L.append(f"| every repetition, records/s | {reps['sluice'] or '-'} | {reps['kafka'] or '-'} | |")
    L.append("")
    if meta.get("sluice_note"):
        L += [f"**Sluice: {meta['sluice_note']}**", ""]
    L.append("## Setup")
    L.append("")
    L.append(f"- {n} combined nodes (broker + controller each) on 127.0.0.1..{n} through `scripts/cluster start "
             f"--nodes {n}` (Kafka: `--kafka`, Kafka {meta['kafka_version']} from Maven jars, each JVM -Xmx512m), "
             f"started fresh per repetition; every node pinned to CPU {BROKER_CPU}, the client to CPU {CLIENT_CPU} "
             "(`taskset`), so the brokers share one core.")
    L.append(f"- Topic `{CLUSTER_TOPIC}`: {CLUSTER_PARTITIONS} partitions, replication factor {n}, "
             f"`min.insync.replicas={CLUSTER_MIN_ISR}`, created with Kafka's `kafka-topics` (TopicCommand).")
    L.append(f"- Workload: untimed warm-up ({meta['cfg']['n_warmup']:,} x 1 KiB, acks=1, its own RF 1 topic), "
             f"`sync`, then ProducerPerformance `--throughput -1` of {meta['cfg']['n_cluster']:,} x 1 KiB records, "
             "acks=all (idempotent, the Java default), linger.ms=5, batch.size=131072. Latency is "
             "ProducerPerformance's, send to acknowledgement. Broker CPU = utime+stime summed over the nodes' "
             "processes during the workload (client start-up included). ISR sizes from `kafka-topics --describe` "
             "after the run.")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def main_cluster(a, clients, cfg):
    """--cluster N: the N-broker workload against both kinds (order alternating per repetition)."""
    reps = a.reps or (1 if a.quick else 3)
    cfg = dict(cfg, **cluster_settings(a.quick))
    out = os.path.join(a.out, f"cluster-{a.cluster}")
    os.makedirs(out, exist_ok=True)
    runs = {"sluice": [], "kafka": []}
    load_before = os.getloadavg()
    for rep in range(reps):
        order = ["sluice", "kafka"] if rep % 2 == 0 else ["kafka", "sluice"]
        if a.only in ("sluice", "kafka"):
            order = [a.only]
        for b in order:
            c = Cluster(b, a.cluster, a.rundir, a.sluice, a.kafka_version)
            runs[b].append(run_cluster(c, clients, f"rep{rep + 1}", cfg))
    w = f"cluster{a.cluster}-produce-1k-acksall"
    sl = [r[w] for r in runs["sluice"] if w in r]
    sluice_note = ""
    if any(r.get("replication_pending") for r in sl):
        sluice_note = (f"replication pending: a probe of 1,000 acks=all records to the RF {a.cluster} topic was refused "
                       f"(see the driver's log), so this binary does not replicate yet and nothing was measured")
    elif sl and min(r.get("isr_min", 0) for r in sl) < a.cluster:
        sluice_note = (f"its ISR ended below {a.cluster} (smallest {min(r.get('isr_min', 0) for r in sl)}): the "
                       f"followers did not stay in sync, so these figures are not RF-{a.cluster} replication")
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "reps": reps, "cfg": cfg,
            "nodes": a.cluster, "workload": w, "note": a.note, "kafka_version": a.kafka_version,
            "load_before": load_before, "load_after": os.getloadavg(), "sluice_note": sluice_note}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=2, default=str)
        f.write("\n")
    write_cluster_report(os.path.join(out, "report.md"), runs, meta)
    print(open(os.path.join(out, "report.md")).read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--libs", required=True)
    ap.add_argument("--classes", required=True)
    ap.add_argument("--go", required=True, help="bench/go binary (franz-go client)")
    ap.add_argument("--rdkafka", default=None, help="rdkafka_performance binary (scripts/librdkafka)")
    ap.add_argument("--no-rdkafka", action="store_true", help="skip the librdkafka workloads")
    ap.add_argument("--rdkafka-only", action="store_true", help="run only the librdkafka workloads (debugging)")
    ap.add_argument("--rundir", required=True)
    ap.add_argument("--logdir", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench"))
    ap.add_argument("--only", choices=["sluice", "kafka", "sink"], default=None, help="run one broker (debugging)")
    ap.add_argument("--no-sink", action="store_true", help="skip the produce sink (client ceiling)")
    ap.add_argument("--p10k-only", action="store_true", help="run only the partitions-10k workload (debugging)")
    ap.add_argument("--go-only", action="store_true", help="run only the *-go workloads (debugging)")
    ap.add_argument("--cluster", type=int, default=None, metavar="N",
                    help="only the N-broker workload (RF N, min.insync.replicas=2, acks=all); report in OUT/cluster-N")
    ap.add_argument("--p10k", action="store_true", help="with --quick: run partitions-10k too (first repetition)")
    ap.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    ap.add_argument("--kafka-version", default="4.1.2", help="the reference broker's release (scripts/kafka-reference)")
    a = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so every broker started is stopped (the finally in run_broker).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The driver (and the start-to-first-ack prober in it) runs on the client core too.
    os.sched_setaffinity(0, {int(CLIENT_CPU)})
    reps = a.reps or (1 if a.quick else 3)
    cfg = settings(a.quick)
    os.makedirs(a.logdir, exist_ok=True)
    os.makedirs(a.rundir, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    clients = Clients(a.libs, a.classes, a.logdir, a.go, a.rdkafka)
    rdkafka = bool(a.rdkafka) and not (a.no_rdkafka or a.p10k_only or a.go_only)
    if a.cluster:
        if a.cluster < CLUSTER_MIN_ISR:
            sys.exit(f"bench: --cluster needs at least {CLUSTER_MIN_ISR} brokers")
        return main_cluster(a, clients, cfg)
    brokers = {"sluice": Sluice(a.sluice, a.rundir), "kafka": Kafka(a.rundir), "sink": Sink(a.libs, a.classes)}
    runs = {"sluice": [], "kafka": [], "sink": []}
    load_before = os.getloadavg()
    t0 = time.monotonic()
    # --quick keeps to its 5-minute budget: partitions-10k (over 2 minutes of Kafka start-ups, its 10,000
    # partitions' creation and a slow produce) only with --p10k, and then, like the sink (five client JVMs),
    # in the first repetition only: their figures barely move between repetitions
    for rep in range(reps):
        full_rep = rep == 0 or not a.quick
        p10k = not a.quick or (a.p10k and rep == 0)
        order = ["sluice", "kafka"] if rep % 2 == 0 else ["kafka", "sluice"]
        if not (a.no_sink or a.go_only) and full_rep:
            order.append("sink")
        if a.only:
            order = [a.only]
        if a.rdkafka_only:
            order = [b for b in order if b != "sink"]
        for b in order:
            tag = f"rep{rep + 1}"
            res = {} if a.rdkafka_only else run_broker(brokers[b], clients, tag, cfg, a.p10k_only, a.go_only, p10k)
            if (rdkafka or a.rdkafka_only) and b != "sink":
                res.update(run_rdkafka(brokers[b], clients, tag, cfg))
            runs[b].append(res)
            # free the disk between brokers
            shutil.rmtree(os.path.join(a.rundir, f"{b}-{tag}"), ignore_errors=True)
    data = aggregate(runs)
    sink = {w: {"records_per_sec": statistics.median(r[w]["records_per_sec"] for r in runs["sink"]),
                "mb_per_sec": statistics.median(r[w]["mb_per_sec"] for r in runs["sink"])}
            for w, *_ in produce_workloads(cfg)} if runs["sink"] else {}
    sink_detail = {w: {k: statistics.median(r[w][k] for r in runs["sink"] if k in r[w])
                       for k in runs["sink"][0][w] if isinstance(runs["sink"][0][w][k], (int, float))}
                   for w, *_ in produce_workloads(cfg)} if runs["sink"] else {}
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "quick": a.quick, "reps": reps,
            "cfg": cfg, "machine": machine(), "note": a.note, "sink": sink, "sink_detail": sink_detail,
            "load_before": load_before, "load_after": os.getloadavg(), "franz_go": franz_go_version(),
            "free_memory_to_host": hands_free_memory_to_host(), "kafka_version": a.kafka_version,
            "librdkafka": librdkafka_version(a.rdkafka)}
    data_out = dict(data)
    if sink_detail:
        data_out["sink"] = {w: {k: round(v, 3) for k, v in d.items()} for w, d in sink_detail.items()}
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(data_out, f, indent=2)
        f.write("\n")
    write_report(os.path.join(a.out, "report.md"), data, meta)
    charts(a.out, data, sink_detail)
    log(f"done in {time.monotonic() - t0:.0f} s: {a.out}/report.md, report.json, throughput.png, latency.png, cpu.png, rss.png")
    print(open(os.path.join(a.out, "report.md")).read().split("## Per workload")[0])


if __name__ == "__main__":
    main()
