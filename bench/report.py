"""The report: medians and spread over repetitions (report.json), report.md with its generated sentences,
the PNG charts, and the machine description they carry. Reads results; runs no workload."""
import math
import os
import platform
import re
import statistics
import subprocess

from common import BROKER_CPU, CLIENT_CPU, ROOT, log
from workloads import (CLUSTER_MIN_ISR, CLUSTER_PARTITIONS, CLUSTER_TOPIC, LINGER_FULL_MS, RDKAFKA_WORKLOADS,
                       SHARE_CHECKS, SHARE_SIZE, SHARE_WORKLOADS)


# (headline field, higher is better)
HEADLINE = {
    "produce-1k-acks1": ("records_per_sec", True),
    "produce-1k-acksall": ("records_per_sec", True),
    "produce-100b-acks1": ("records_per_sec", True),
    "produce-100b-acks1-fullbatch": ("records_per_sec", True),
    "consume-1k": ("records_per_sec", True),
    "latency-e2e-1k": ("p99_ms", False),
    "consume-1k-tool": ("records_per_sec", True),
    "latency-e2e-tool": ("p99_ms", False),
    "produce-1k-acks1-go": ("records_per_sec", True),
    "produce-1k-acksall-go": ("records_per_sec", True),
    "produce-100b-acks1-go": ("records_per_sec", True),
    "consume-1k-go": ("records_per_sec", True),
    "produce-1k-acksall-idem-1p-rdkafka": ("records_per_sec", True),
    "produce-1k-acks1-rdkafka": ("records_per_sec", True),
    **{name: ("records_per_sec", True) for name, _ in SHARE_WORKLOADS},
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
            med["min"], med["max"] = min(med["reps"]), max(med["reps"])
            cpu = [r["client_cpu_us_per_record"] for r in reps if _num(r.get("client_cpu_us_per_record"))]
            if cpu:
                med["client_cpu_us_per_record_reps"] = [round(v, 3) for v in cpu]
            # the share workloads' correctness counts: every repetition's, not a median
            for k in SHARE_CHECKS:
                if any(_num(r.get(k)) for r in reps):
                    med[f"{k}_all_reps"] = sum(r[k] for r in reps if _num(r.get(k)))
            entry[b] = med
        if "sluice" in entry and "kafka" in entry and entry["kafka"].get(field):
            entry["ratio"] = round(entry["sluice"][field] / entry["kafka"][field], 3)
            # per repetition: both brokers of repetition i ran back to back, in the same window of the machine
            pairs = [(r_s[w], r_k[w]) for r_s, r_k in zip(runs["sluice"], runs["kafka"]) if w in r_s and w in r_k]
            entry["ratio_reps"] = [round(s_[field] / k_[field], 3) for s_, k_ in pairs
                                   if _num(s_.get(field)) and _num(k_.get(field)) and k_[field]]
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
                   "consume-1k", "consume-1k-tool"]
THROUGHPUT_GO = ["produce-1k-acks1-go", "produce-1k-acksall-go", "produce-100b-acks1-go", "consume-1k-go"]
THROUGHPUT_RDKAFKA = [name for name, *_ in RDKAFKA_WORKLOADS]
THROUGHPUT_SHARE = [name for name, _ in SHARE_WORKLOADS]
THROUGHPUT = THROUGHPUT_JAVA + THROUGHPUT_GO + THROUGHPUT_RDKAFKA + THROUGHPUT_SHARE

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
    ("client threads scheduled in, per 1,000 records (schedstat)", "client_wakeups_per_1k_records", "{:,.0f}"),
    ("client read/write system calls, per 1,000 records (/proc/PID/io)", "client_syscalls_per_1k_records", "{:,.0f}"),
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
    if w in THROUGHPUT_SHARE:
        return "Java share consumers"
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
    wk, sc = "client_wakeups_per_1k_records", "client_syscalls_per_1k_records"
    if all(_num(x.get(f)) for x in (s, k) for f in (wk, sc)):
        out.append(f"Per 1,000 records the client's threads were scheduled in {s[wk]:,.0f} vs {k[wk]:,.0f} times and "
                   f"made {s[sc]:,.0f} vs {k[sc]:,.0f} read/write system calls.")
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
    for w in THROUGHPUT + ["latency-e2e-1k", "latency-e2e-tool"]:
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


SHARE_ROWS = [
    ("records/s (first measured record to the last record's first delivery)", "records_per_sec", "{:,.0f}"),
    ("records/s until every acknowledgement was confirmed", "acked_records_per_sec", "{:,.0f}"),
    ("last acknowledgement confirmed after the last record, ms", "last_ack_after_last_record_ms", "{:,.0f}"),
    ("records in the measured phase", "records", "{:,.0f}"),
    ("consumers holding records when the clock started", "consumers_active_at_start", "{:.0f}"),
    ("records per consumer in the measured phase, fewest", "per_consumer_min", "{:,.0f}"),
    ("records per consumer in the measured phase, most", "per_consumer_max", "{:,.0f}"),
    ("ShareFetch responses in the measured phase (all consumers)", "fetches", "{:,.0f}"),
    ("records per ShareFetch response", "records_per_fetch", "{:,.0f}"),
    ("ShareFetch responses per second", "fetches_per_sec", "{:,.0f}"),
    ("ShareFetch latency, ms: mean of the consumers' fetch-latency-avg (a long poll counts whole)",
     "fetch_latency_avg_ms", "{:.1f}"),
    ("ShareFetch latency, ms: the consumers' largest fetch-latency-max", "fetch_latency_max_ms", "{:,.0f}"),
    ("first ShareGroupHeartbeat to the first record, s (not measured: before the clock)", "join_to_first_record_s",
     "{:.1f}"),
    ("client JVM, % of its core (measured phase)", "client_jvm_pct_of_core", "{:.0f}"),
    ("client CPU, µs per record", "client_cpu_us_per_record", "{:.2f}"),
    ("- poll loops (the consumers' application threads)", "client_app_cpu_us_per_record", "{:.2f}"),
    ("- the consumers' background (network) threads", "client_network_cpu_us_per_record", "{:.2f}"),
    ("broker process, % of its core (measured phase)", "broker_pct_of_core", "{:.0f}"),
    ("broker CPU, µs per record (whole workload: every record of the topic)", "broker_cpu_us_per_record", "{:.2f}"),
    ("broker threads runnable but waiting for the core, s (whole workload; schedstat)", "broker_runqueue_wait_s",
     "{:.2f}"),
    ("client core busy, % (every process on it; above the client's share = other processes)",
     "client_core_busy_pct", "{:.0f}"),
    ("broker core busy, % (every process on it)", "broker_core_busy_pct", "{:.0f}"),
    ("whole workload, s (client JVM start to exit)", "wall_s", "{:.1f}"),
    ("broker peak RSS, MiB", "rss_peak_mb", "{:,.0f}"),
]


def share_section(W, meta):
    """## Share groups: the share-consume-* rows side by side, with their correctness counts."""
    if not any(W.get(w, {}).get(b) for w in THROUGHPUT_SHARE for b in ("sluice", "kafka")):
        return []
    c = meta["cfg"]
    L = ["## Share groups (KIP-932): one partition, 1, 3 and 6 share consumers", ""]
    L.append(f"Reference: Kafka {meta.get('share_kafka_version')} (share groups are production-ready from 4.2; "
             f"Kafka 4.1's are a preview behind `share.version`), clients kafka-clients "
             f"{meta.get('share_clients_version')}'s `KafkaShareConsumer` against both brokers. Medians over the "
             "repetitions (1c, 3c, 6c: the number of share consumers); every repetition's records/s and the ratio "
             "in the last rows.")
    L.append("")
    present = [w for w in THROUGHPUT_SHARE if W.get(w, {}).get("sluice") or W.get(w, {}).get("kafka")]
    cols = [(w, b) for w in present for b in ("sluice", "kafka")]
    L.append("| measure | " + " | ".join(f"{w.rsplit('-', 1)[1]} {b}" for w, b in cols) + " |")
    L.append("|---|" + "---|" * len(cols))

    def row(label, cells):
        L.append(f"| {label} | " + " | ".join(cells) + " |")
    for label, f, fm in SHARE_ROWS:
        vals = [W[w].get(b, {}).get(f) for w, b in cols]
        if any(_num(v) for v in vals):
            row(label, [fm.format(v) if _num(v) else "-" for v in vals])
    for n in SHARE_CHECKS:
        vals = [W[w].get(b, {}).get(f"{n}_all_reps") for w, b in cols]
        row(f"{n} (sum over the repetitions)", [f"{v:,.0f}" if _num(v) else "-" for v in vals])
    row("every repetition, records/s", [", ".join(fmt(v) for v in W[w].get(b, {}).get("reps", [])) or "-"
                                        for w, b in cols])
    ratios = []
    for w in present:
        e = W[w]
        rr = e.get("ratio_reps") or []
        ratios += [fmt(e.get("ratio")), f"{fmt(min(rr))}-{fmt(max(rr))}" if rr else "-"]
    row("records/s Sluice / Kafka: median ratio, and its range over the repetitions", ratios)
    L.append("")
    L.append(f"- Topic `share-1k`: one partition, {c['n_share_warm'] + c['n_share']:,} records of {SHARE_SIZE} B "
             "(`bench/java/ShareBench fill`: idempotent producer, acks=all, linger.ms=5, batch.size=131072; the "
             "value starts with the record's id, which is its offset), written once per broker start; the broker "
             "is started fresh for the share workloads in every repetition.")
    L.append("- Per consumer count a share group of its own (`share.auto.offset.reset=earliest` set with "
             "IncrementalAlterConfigs on the GROUP resource), its consumers `KafkaShareConsumer`s on one thread each "
             "in one client JVM (`ShareBench consume`, on the client core: one JVM because six would put six JITs "
             "and heaps on that core; Kafka's ShareConsumerPerformance `--threads` runs its consumers the same way), "
             "the client's defaults otherwise: implicit acknowledgement (each poll ACCEPTs the records of the one "
             "before; commitSync once every record was seen), max.poll.records 500, fetch.max.wait.ms 500, "
             "the batch-optimized acquire mode. Both brokers at their defaults, "
             "`group.share.partition.max.record.locks` 2000, record lock 30 s.")
    L.append(f"- The clock starts once {c['n_share_warm']:,} distinct records were seen (JIT, group join and the "
             "share-partition's initialization are behind by then) and stops when the last record was first "
             f"delivered: records/s = the records after the first {c['n_share_warm']:,} / that time. The run goes "
             "on until the broker confirmed every record's acknowledgement (the acknowledgement commit callback "
             "without error); `acked_records_per_sec` ends there. A confirmation that rode on a long-polling "
             "ShareFetch comes back with its answer, up to fetch.max.wait.ms later.")
    L.append("- Correctness while measuring: every id seen, id = offset, every value of its size, duplicate "
             "deliveries and records delivered with a delivery count above 1 (a redelivery, e.g. after a lock "
             "timeout) counted, acknowledgement errors counted.")
    L.append("")
    return L


def write_report(path, data, meta):
    W = data["workloads"]
    L = []
    share_only = meta.get("share_only")
    L.append("# Sluice vs Apache Kafka: " + ("share groups (KIP-932)" if share_only else "side-by-side benchmark"))
    L.append("")
    L.append(f"Date: {meta['date']}. Mode: {'--quick' if meta['quick'] else 'full'}, {meta['reps']} repetition(s), "
             "medians over repetitions. Generated by `scripts/bench" + (" --share-only`." if share_only else "`."))
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
    if meta["reps"] == 1:
        L.append("**One repetition (`--quick` or `--reps 1`): every figure is a single run, with no spread; "
                 "repetitions on one broker can differ more than the brokers do (see the README).**")
    else:
        L.append(f"Spread: each broker's min-max over the {meta['reps']} repetitions, and the ratio's range over "
                 "the repetitions (repetition i's Sluice run over repetition i's Kafka run: the same window of "
                 "the machine, in alternating order).")
    L.append("")
    L.append("| workload | headline | sluice | sluice min-max | kafka | kafka min-max | ratio | ratio range | better |")
    L.append("|---|---|---|---|---|---|---|---|---|")

    def span(d, key_min="min", key_max="max"):
        lo, hi = d.get(key_min), d.get(key_max)
        return f"{fmt(lo)}-{fmt(hi)}" if _num(lo) and _num(hi) else "-"
    for w, (field, higher) in HEADLINE.items():
        e = W.get(w, {})
        sd, kd = e.get("sluice", {}), e.get("kafka", {})
        if not sd and not kd:
            continue  # not run (--quick without --p10k, an --*-only run)
        s, k = sd.get(field), kd.get(field)
        r = e.get("ratio")
        rr = e.get("ratio_reps") or []
        better = "-"
        if r is not None:
            better = "sluice" if (r > 1) == higher and r != 1 else ("kafka" if r != 1 else "tie")
        L.append(f"| {w} | {field} ({'higher' if higher else 'lower'} is better) | {fmt(s)} | {span(sd)} | {fmt(k)} | "
                 f"{span(kd)} | {fmt(r)} | {f'{fmt(min(rr))}-{fmt(max(rr))}' if rr else '-'} | {better} |")
    L.append("")
    if meta.get("share_kafka_version"):
        L.append(f"share-consume-* rows: against Kafka {meta['share_kafka_version']} (share groups production-ready "
                 f"from 4.2; the section \"Share groups\" below), with kafka-clients {meta['share_clients_version']}"
                 + (f"; every other row against Kafka {meta.get('kafka_version')}."
                    if meta["share_kafka_version"] != meta.get("kafka_version") and not meta.get("share_only")
                    else "."))
        L.append("")
    if not share_only:
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
    L.extend(share_section(W, meta))
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
    L.append("- Validation: both brokers check every produced batch before appending it, with their defaults: the batch "
             "CRC-32C and header, then a walk of its records (Kafka's `LogValidator`; Sluice's `log_validator`, the same "
             "checks); nothing is skipped for the benchmark, and no acknowledgement waits or is delayed on purpose.")
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
    kafka_version = meta.get("share_kafka_version") if share_only else meta.get("kafka_version", "4.1.2")
    L.append(f"- Kafka {kafka_version}, KRaft combined mode, from Maven jars "
             "(`scripts/kafka-reference`), `-Xms256m -Xmx1g -XX:+UseG1GC`. Sluice: `target/release/sluice serve` with defaults, fresh data dir.")
    if share_only:
        L.append(f"- Client: kafka-clients {meta.get('share_clients_version')} (`bench/java/ShareBench`), JVM "
                 "`-Xms512m -Xmx1g`; the share workloads' setup is under \"Share groups\" above.")
        L.append("")
        with open(path, "w") as f:
            f.write("\n".join(L))
        return
    L.append("- Clients: kafka-clients 4.1.2 (Kafka's own jars) for both brokers, JVM `-Xmx1g`"
             + (f"; share-consume-*: kafka-clients {meta['share_clients_version']} against Sluice and Kafka "
                f"{meta['share_kafka_version']} (\"Share groups\" above)." if meta.get("share_kafka_version") else "."))
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
             f"topic, seekToBeginning, poll until all {c['n_1k']:,} records are read (no consumer group; "
             "consume-1k-tool below is Kafka's ConsumerPerformance, with one). A cold JVM, unlike Kafka's tools here.")
    L.append(f"- latency-e2e-1k: `BenchClient latency`: one producer (acks=1, linger.ms=0) at a fixed "
             f"{c['lat_rate']} records/s of {c['lat_size']} B for {c['lat_secs']} s (after {c['lat_warmup']} s "
             "warm-up, discarded), one assign() consumer (default fetch.max.wait.ms=500, so the broker's long-poll "
             "wake-up is on the path) on a 1-partition topic; latency = consume time - send time, same JVM clock. "
             "Kafka's EndToEndLatency is one-record-at-a-time with whole-millisecond resolution, hence our own.")
    L.append("- Java produce workloads, consume-1k-tool and latency-e2e-tool run in a warmed client JVM: "
             "`bench/java/Warm` calls the tool's main class twice in one JVM, first a warm-up (produce: "
             f"{c['n_warmup']:,} records of the same shape to the topic `warmup`; consume: {c['n_warmup']:,} records "
             f"of `warmup`; EndToEndLatency: {c.get('n_e2e_tool_warmup', 0):,} records), then the measured run with "
             "the arguments a user gives the shell script (kafka-producer-perf-test.sh, "
             "kafka-consumer-perf-test.sh and kafka-e2e-latency.sh run exactly these main classes through "
             "kafka-run-class.sh). A cold JVM spends 40-60% of a short run's CPU in its JIT compiler, which "
             "swamps what the broker changes; the cold figure is `client_cpu_total_s` (whole life).")
    L.append(f"- consume-1k-tool: Kafka's `ConsumerPerformance --bootstrap-server B --topic p1k-acks1 --messages "
             f"{c['n_1k']:,} --timeout 60000 --print-metrics` (subscribe, a group of its own, from the earliest "
             "offset). records/s is its fetch.nMsg.sec (after the group join); `whole_run_records_per_sec` "
             "(its nMsg.sec) and `rebalance_ms` include the join. Both brokers run with "
             "group.initial.rebalance.delay.ms=0 (the reference's setting; Kafka's and Sluice's default is 3000).")
    L.append(f"- latency-e2e-tool: Kafka's `EndToEndLatency B e2e-tool {c.get('n_e2e_tool', 0):,} 1 "
             f"{c['lat_size']}` (one record at a time: send, wait for the ack, poll it back by an assigned "
             "consumer, then the next; acks=1); its percentiles are whole milliseconds, as the tool prints them.")
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


def share_chart(outdir, W, plt, colors):
    """share.png: records/s by share consumers, both brokers, medians with the repetitions' min-max."""
    if not any(W.get(w, {}).get(b) for w in THROUGHPUT_SHARE for b in ("sluice", "kafka")):
        return []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = range(len(SHARE_WORKLOADS))
    for i, b in enumerate(("sluice", "kafka")):
        ds = [W.get(w, {}).get(b, {}) for w, _ in SHARE_WORKLOADS]
        med = [d.get("records_per_sec", 0) or 0 for d in ds]
        err = [[max(0, m - d.get("min", m)) for m, d in zip(med, ds)],
               [max(0, d.get("max", m) - m) for m, d in zip(med, ds)]]
        ax.bar([x + (i - 0.5) * 0.38 for x in xs], med, 0.38, yerr=err, capsize=3, label=b, color=colors[b])
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{n} consumer{'s' if n > 1 else ''}" for _, n in SHARE_WORKLOADS])
    ax.set_ylabel("records/s")
    ax.set_title(f"Share group consume, one partition, {SHARE_SIZE} B records (median, min-max)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "share.png"), dpi=100)
    plt.close(fig)
    return ["share.png"]


def charts(outdir, data, sink, share_only=False):
    """The PNG charts; returns the names of the files written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no charts")
        return []
    W = data["workloads"]
    colors = {"sluice": "#1f77b4", "kafka": "#ff7f0e"}
    written = share_chart(outdir, W, plt, colors)
    if share_only:
        return written

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
    groups = ["rss-idle"] + tw + ["latency-e2e-1k", "latency-e2e-tool"]
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
    return written + ["throughput.png", "latency.png", "cpu.png", "rss.png"]


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
