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

from common import BROKER_CPU, CLIENT_CPU, ROOT, log
from procfs import (CLK_TCK, CpuSampler, Sampler, client_cpu_figures, cpu_seconds, fd_limit, mappings,
                    meminfo_mb, open_fds, proc_status, reset_hwm, runqueue_wait, settle_writeback)
from report import aggregate, charts, franz_go_version, hands_free_memory_to_host, librdkafka_version, machine, \
    write_cluster_report, write_report
from share import ShareClient, run_share, share_kafka_version
from workloads import (CLUSTER_MIN_ISR, CLUSTER_PARTITIONS, CLUSTER_TOPIC, E2E_TOOL_TOPIC, GO_CONSUME_TOPIC,
                       RDKAFKA_SIZE,
                       RDKAFKA_WORKLOADS, go_produce_workloads, produce_workloads, settings, workload_volume)

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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


def time_first_ack(cmd, port, topic, out_path, timeout=120, env=None):
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
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
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


class Clients:
    def __init__(self, libs, classes, logdir, go_bin=None, rdkafka_bin=None):
        self.cp = f"{libs}/*:{classes}"
        self.logdir = logdir
        self.go_bin = go_bin  # bench/go (benchgo): the franz-go client
        self.rdkafka_bin = rdkafka_bin  # librdkafka's rdkafka_performance (scripts/librdkafka)
        self.log4j = os.path.join(ROOT, "bench", "log4j2-client.properties")
        self.broker_pid = None  # sampled alongside each client when set
        self.cpu, self.cpu_total_s, self.lines = None, None, []

    def java(self, args, name, timeout=600, env=None, cp=None):
        """Runs a client JVM on the client core (see run); `cp` replaces the classpath of the 4.1.2 jars and
        bench/java (the share workloads' kafka-clients 4.4.0 and ShareBench)."""
        return self.run(["java", "-Xms512m", "-Xmx1g", f"-Dlog4j2.configurationFile={self.log4j}", "-cp",
                         cp or self.cp] + args, name, timeout, env)

    def tool(self, main_class, warm_args, args, name, timeout=600):
        """Runs one of Kafka's tools (the main class its shell script runs, with a user's arguments) in a client
        JVM warmed first: `bench/java/Warm` calls the same main with `warm_args`, its output on stderr (the
        log), then with `args`, whose output alone is on stdout (so the measured phase is the second run's)."""
        return self.java(["Warm", main_class, *warm_args, "--", *args], name, timeout=timeout)

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

    def producer_perf(self, bootstrap, topic, n, size, acks, name, linger_ms=5, extra_props=(), timeout=600,
                      warm_records=0):
        """kafka-producer-perf-test.sh's ProducerPerformance; with warm_records, in a JVM warmed by a first run of
        warm_records of the same shape to the topic `warmup` (Clients.tool)."""
        def pp_args(t, count, metrics):
            return ["--topic", t, "--num-records", str(count), "--record-size", str(size), "--throughput", "-1",
                    *(["--print-metrics"] if metrics else []), "--producer-props", f"bootstrap.servers={bootstrap}",
                    f"acks={acks}", f"linger.ms={linger_ms}", "batch.size=131072", *extra_props]
        main = "org.apache.kafka.tools.ProducerPerformance"
        if warm_records:
            out = self.tool(main, pp_args("warmup", warm_records, False), pp_args(topic, n, True), name,
                            timeout=timeout)
        else:
            out = self.java([main, *pp_args(topic, n, True)], name, timeout=timeout)
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


    # ConsumerPerformance's result line (its default, non --show-detailed-stats, format): start.time, end.time,
    # data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms,
    # fetch.MB.sec, fetch.nMsg.sec
    CP_RE = re.compile(r"^\d{4}-\d\d-\d\d [\d:]+, \d{4}-\d\d-\d\d [\d:]+, ([\d.]+), ([\d.]+), (\d+), ([\d.]+), "
                       r"(-?\d+), (-?\d+), ([\d.]+), ([\d.]+)\s*$")
    CONSUMER_METRICS = ("fetch-size-avg", "records-per-request-avg", "fetch-total", "fetch-latency-avg",
                        "io-wait-time-ns-total", "fetch-throttle-time-avg")

    def consumer_perf(self, bootstrap, topic, n, name, warm_records=0, timeout=600):
        """kafka-consumer-perf-test.sh's ConsumerPerformance (subscribe, a group of its own, from the earliest
        offset), in a JVM warmed by reading warm_records of the topic `warmup` first. Headline: its
        fetch.nMsg.sec (records over the time after the group join); its whole-run rate and the join time
        too. The measured phase for CPU is its fetch time."""
        def cp_args(t, count):
            return ["--bootstrap-server", bootstrap, "--topic", t, "--messages", str(count), "--timeout", "60000",
                    "--print-metrics"]
        main = "org.apache.kafka.tools.ConsumerPerformance"
        if warm_records:
            out = self.tool(main, cp_args("warmup", warm_records), cp_args(topic, n), name, timeout=timeout)
        else:
            out = self.java([main, *cp_args(topic, n)], name, timeout=timeout)
        m = next((self.CP_RE.match(line) for line in out.splitlines() if self.CP_RE.match(line)), None)
        if not m:
            raise RuntimeError(f"{name}: no ConsumerPerformance result line (see {self.logdir}/{name}.log)")
        records = int(m.group(3))
        if records < n:
            raise RuntimeError(f"{name}: {records} of {n} records consumed")
        fetch_s = int(m.group(6)) / 1000.0
        res = {"records_per_sec": float(m.group(8)), "mb_per_sec": float(m.group(7)),
               "whole_run_records_per_sec": float(m.group(4)), "rebalance_ms": float(m.group(5)),
               "seconds": fetch_s, "records": records}
        for line in out.splitlines():
            mt = self.METRIC_RE.match(line)
            if mt and mt.group(1) == "consumer-fetch-manager-metrics" and mt.group(2) in self.CONSUMER_METRICS \
                    and "," not in mt.group(3):
                try:
                    v = float(mt.group(4).replace(",", ""))
                except ValueError:
                    continue
                if math.isfinite(v):
                    res["consumer_" + mt.group(2).replace("-", "_")] = v
        # the names BenchClient's consume uses, so the CPU tables show both consumers alike
        if "consumer_fetch_size_avg" in res:
            res["fetch_size_avg_kib"] = res.pop("consumer_fetch_size_avg") / 1024
        if "consumer_records_per_request_avg" in res:
            res["records_per_request_avg"] = res.pop("consumer_records_per_request_avg")
        if "consumer_fetch_total" in res:
            res["fetches"] = res.pop("consumer_fetch_total")
            if fetch_s > 0:
                res["fetches_per_sec"] = res["fetches"] / fetch_s
        if "consumer_fetch_latency_avg" in res:
            res["fetch_latency_avg_ms"] = res.pop("consumer_fetch_latency_avg")
        res.pop("consumer_io_wait_time_ns_total", None)  # the whole consumer's life, not the fetch phase
        # It prints its result after closing the consumer (a group's LeaveGroup), so the window ends at its own
        # end.time: the header line (printed at its start.time) plus end.time - start.time.
        stamps = [datetime.strptime(x, "%Y-%m-%d %H:%M:%S:%f") for x in m.group(0).split(", ")[:2]]
        header = next((t for t, line in self.lines if line.startswith("start.time, end.time")), None)
        end = header + (stamps[1] - stamps[0]).total_seconds() if header is not None else None
        res.update(client_cpu_figures(self, records, fetch_s, records * 1024, self.CP_RE, end=end))
        return res

    E2E_AVG_RE = re.compile(r"^Avg latency: ([\d.]+) ms")
    E2E_PCT_RE = re.compile(r"^Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")

    def end_to_end_latency(self, bootstrap, topic, n, size, name, acks="1", warm_records=0, timeout=600):
        """kafka-e2e-latency.sh's EndToEndLatency: one record at a time, sent synchronously and polled back by an
        assigned consumer before the next (so its rate is 1 / latency); percentiles in whole milliseconds, as
        the tool prints them. In a JVM warmed by warm_records of the same kind first."""
        args = [bootstrap, topic, str(n), acks, str(size)]
        main = "org.apache.kafka.tools.EndToEndLatency"
        if warm_records:
            out = self.tool(main, [bootstrap, topic, str(warm_records), acks, str(size)], args, name,
                            timeout=timeout)
        else:
            out = self.java([main, *args], name, timeout=timeout)
        avg = pct = None
        for line in out.splitlines():
            avg = self.E2E_AVG_RE.match(line) or avg
            pct = self.E2E_PCT_RE.match(line) or pct
        if not (avg and pct):
            raise RuntimeError(f"{name}: no EndToEndLatency result (see {self.logdir}/{name}.log)")
        return {"avg_ms": float(avg.group(1)), "p50_ms": float(pct.group(1)), "p99_ms": float(pct.group(2)),
                "p999_ms": float(pct.group(3)), "records": n}

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
        # The reference broker's one group setting that differs from Kafka's defaults (scripts/kafka-reference):
        # a new group's first join is not held back 3 s for more members (ConsumerPerformance joins one)
        props = os.path.join(self.rundir, "sluice-bench.properties")
        with open(props, "w") as f:
            f.write("group.initial.rebalance.delay.ms=0\n")
        cmd = ["taskset", "-c", BROKER_CPU, self.binary, "serve", props, "--listen", self.bootstrap, "--data-dir",
               data]
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

    def __init__(self, rundir, version=None):
        self.rundir = rundir
        self.script = os.path.join(ROOT, "scripts", "kafka-reference")
        self.pid = None
        self.dir = None
        # the release scripts/kafka-reference runs: KAFKA_VERSION of the driver's environment unless given
        self.env = dict(os.environ, KAFKA_VERSION=version) if version else None

    def start(self, clients, tag):
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.dir = os.path.join(self.rundir, f"kafka-{tag}")
        shutil.rmtree(self.dir, ignore_errors=True)
        # Format (KRaft storage format is a separate admin step) with one untimed start/stop; the timed start
        # then runs on the formatted, empty data dir.
        with open(os.path.join(clients.logdir, f"{tag}-kafka-format.log"), "w") as lf:
            subprocess.run([self.script, "start", "--dir", self.dir, "--port", str(self.port)],
                           stdout=lf, stderr=lf, check=True, timeout=180, env=self.env)
            subprocess.run([self.script, "stop", "--dir", self.dir], stdout=lf, stderr=lf, check=True, timeout=60,
                           env=self.env)
        cmd = ["taskset", "-c", BROKER_CPU, self.script, "start", "--dir", self.dir, "--port", str(self.port),
               "--keep-data"]
        launcher, first_ack, listen = time_first_ack(cmd, self.port, "startup",
                                                     os.path.join(clients.logdir, f"{tag}-kafka-broker.log"),
                                                     env=self.env)
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
                           stderr=subprocess.DEVNULL, timeout=60, env=self.env)
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


def run_broker(broker, clients, tag, cfg, p10k_only=False, go_only=False, p10k=True, java_only=False):
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
                res[name] = clients.producer_perf(b, topic, n, size, acks, f"{tag}-sink-{name}", linger,
                                                  warm_records=cfg["n_warmup"])
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
                  (E2E_TOOL_TOPIC, 1),
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
                                                             linger, warm_records=cfg["n_warmup"]))
            measured("consume-1k", lambda: clients.bench(["consume", b, "p1k-acks1", str(n1k)],
                                                         f"{tag}-{broker.name}-consume-1k"))
            measured("latency-e2e-1k", lambda: clients.bench(
                ["latency", b, "lat", str(cfg["lat_rate"]), str(cfg["lat_secs"]), str(cfg["lat_size"]),
                 str(cfg["lat_warmup"])], f"{tag}-{broker.name}-latency"))
            # Kafka's standard tools as a user runs them (kafka-consumer-perf-test.sh, kafka-e2e-latency.sh)
            measured("consume-1k-tool", lambda: clients.consumer_perf(
                b, "p1k-acks1", n1k, f"{tag}-{broker.name}-consume-1k-tool", warm_records=cfg["n_warmup"]))
            measured("latency-e2e-tool", lambda: clients.end_to_end_latency(
                b, E2E_TOOL_TOPIC, cfg["n_e2e_tool"], cfg["lat_size"], f"{tag}-{broker.name}-latency-e2e-tool",
                warm_records=cfg["n_e2e_tool_warmup"]))
        # the Go client (after every Java workload, so those run as they always have)
        if java_only:
            res["rss-peak-under-load"] = {"rss_mb": max(res[w]["rss_peak_mb"] for w in res if "rss_peak_mb" in res[w])}
            return res
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
    ap.add_argument("--java-only", action="store_true",
                    help="run only the Java workloads: no *-go, *-rdkafka, sink, partitions-10k (debugging)")
    ap.add_argument("--cluster", type=int, default=None, metavar="N",
                    help="only the N-broker workload (RF N, min.insync.replicas=2, acks=all); report in OUT/cluster-N")
    ap.add_argument("--p10k", action="store_true", help="with --quick: run partitions-10k too (first repetition)")
    ap.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    ap.add_argument("--kafka-version", default="4.1.2", help="the reference broker's release (scripts/kafka-reference)")
    ap.add_argument("--share-libs", default=None, help="the share workloads' client jars (kafka-clients 4.4.0)")
    ap.add_argument("--share-classes", default=None, help="bench/java/ShareBench compiled against --share-libs")
    ap.add_argument("--share-clients-version", default="4.4.0", help="the kafka-clients release in --share-libs")
    ap.add_argument("--no-share", action="store_true", help="skip the share-group workloads")
    ap.add_argument("--share-only", action="store_true",
                    help="run only the share-group workloads; report in OUT/share")
    a = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so every broker started is stopped (the finally in run_broker).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The driver (and the start-to-first-ack prober in it) runs on the client core too.
    os.sched_setaffinity(0, {int(CLIENT_CPU)})
    reps = a.reps or (1 if a.quick else 3)
    cfg = settings(a.quick)
    if a.share_only:
        a.out = os.path.join(a.out, "share")
    os.makedirs(a.logdir, exist_ok=True)
    os.makedirs(a.rundir, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    clients = Clients(a.libs, a.classes, a.logdir, a.go, a.rdkafka)
    rdkafka = bool(a.rdkafka) and not (a.no_rdkafka or a.p10k_only or a.go_only or a.java_only or a.share_only)
    share = bool(a.share_libs and a.share_classes) and not (a.no_share or a.p10k_only or a.go_only or a.java_only
                                                            or a.rdkafka_only)
    if a.share_only and not share:
        sys.exit("bench: --share-only needs --share-libs and --share-classes (scripts/bench passes them)")
    share_client = ShareClient(clients, a.share_libs, a.share_classes) if share else None
    share_kafka = share_kafka_version(a.kafka_version)
    if a.cluster:
        if a.cluster < CLUSTER_MIN_ISR:
            sys.exit(f"bench: --cluster needs at least {CLUSTER_MIN_ISR} brokers")
        return main_cluster(a, clients, cfg)
    brokers = {"sluice": Sluice(a.sluice, a.rundir), "kafka": Kafka(a.rundir), "sink": Sink(a.libs, a.classes)}
    # the share rows' reference broker: production-ready share groups (4.2+), see bench/share.py
    share_brokers = {"sluice": brokers["sluice"], "kafka": Kafka(a.rundir, share_kafka)}
    runs = {"sluice": [], "kafka": [], "sink": []}
    load_before = os.getloadavg()
    t0 = time.monotonic()
    # partitions-10k (Kafka's start-ups, its 10,000 partitions' creation and a slow produce: minutes) runs in
    # the first repetition only, its figures barely move between repetitions; --quick keeps to its 5-minute
    # budget: partitions-10k only with --p10k, and the sink (five client JVMs) in the first repetition only
    for rep in range(reps):
        full_rep = rep == 0 or not a.quick
        p10k = (not a.quick or a.p10k) and rep == 0
        order = ["sluice", "kafka"] if rep % 2 == 0 else ["kafka", "sluice"]
        if not (a.no_sink or a.go_only or a.java_only or a.share_only) and full_rep:
            order.append("sink")
        if a.only:
            order = [a.only]
        if a.rdkafka_only or a.share_only:
            order = [b for b in order if b != "sink"]
        for b in order:
            tag = f"rep{rep + 1}"
            res = {} if a.rdkafka_only or a.share_only else run_broker(
                brokers[b], clients, tag, cfg, a.p10k_only, a.go_only, p10k and not a.java_only, a.java_only)
            if (rdkafka or a.rdkafka_only) and b != "sink":
                res.update(run_rdkafka(brokers[b], clients, tag, cfg))
            if share and b != "sink":
                res.update(run_share(share_brokers[b], clients, share_client, tag, cfg))
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
            "librdkafka": librdkafka_version(a.rdkafka), "share_only": a.share_only,
            "share_kafka_version": share_kafka if share else None,
            "share_clients_version": a.share_clients_version if share else None}
    data_out = dict(data)
    data_out["meta"] = {k: meta[k] for k in ("date", "quick", "reps", "kafka_version", "share_kafka_version",
                                             "share_clients_version", "load_before", "load_after")}
    if sink_detail:
        data_out["sink"] = {w: {k: round(v, 3) for k, v in d.items()} for w, d in sink_detail.items()}
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(data_out, f, indent=2)
        f.write("\n")
    write_report(os.path.join(a.out, "report.md"), data, meta)
    pngs = charts(a.out, data, sink_detail, share_only=a.share_only)
    log(f"done in {time.monotonic() - t0:.0f} s: {a.out}/report.md, report.json, {', '.join(pngs)}")
    print(open(os.path.join(a.out, "report.md")).read().split("## Per workload")[0])


if __name__ == "__main__":
    main()
