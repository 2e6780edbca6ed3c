"""The share-group workloads (KIP-932, issue 19): one partition pre-filled with 1 KiB records, then 1, 3 and 6
share consumers of one share group each consume all of them until every record is acknowledged.

The consumers are kafka-clients 4.4.0's KafkaShareConsumer, one per thread of one client JVM
(`bench/java/ShareBench consume`, pinned to the client core like every other client): one JVM because on
this 2-core machine six JVMs would put six JITs, six heaps and six sets of GC threads on the client core,
measuring JVM start-up rather than the share protocol; and because that is how Kafka's own
ShareConsumerPerformance (`--threads`) runs several share consumers. Implicit acknowledgement (the
client's default: each poll ACCEPTs the records of the one before).

Each broker is started fresh for these workloads in every repetition (like the librdkafka ones): the
reference is Kafka `share_kafka_version()` (4.4.0 unless the bench's own reference is 4.2 or later), since
Kafka 4.1's share groups are a preview behind `share.version`."""
import json
import os
import re
import shutil
import time

from common import log
from procfs import client_cpu_figures, cpu_seconds, proc_status, reset_hwm, runqueue_wait, settle_writeback
from workloads import (SHARE_CHECKS, SHARE_KAFKA_DEFAULT, SHARE_KAFKA_MIN, SHARE_SIZE, SHARE_TOPIC,
                       SHARE_WORKLOADS)

RESULT_RE = re.compile(r"^RESULT ")


def share_kafka_version(kafka_version):
    """The reference release the share rows run against: the bench's own if it has production-ready share
    groups (4.2 or later), else SHARE_KAFKA_DEFAULT."""
    try:
        major_minor = tuple(int(x) for x in kafka_version.split(".")[:2])
    except ValueError:
        return SHARE_KAFKA_DEFAULT
    return kafka_version if major_minor >= SHARE_KAFKA_MIN else SHARE_KAFKA_DEFAULT


class ShareClient:
    """bench/java/ShareBench on the client core, with kafka-clients 4.4.0 on its classpath."""

    def __init__(self, clients, libs, classes):
        self.clients = clients
        self.cp = f"{libs}/*:{classes}"

    def _run(self, args, name, timeout):
        out = self.clients.java(["ShareBench", *args], name, timeout=timeout, cp=self.cp)
        for line in out.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        raise RuntimeError(f"{name}: no RESULT line (see {self.clients.logdir}/{name}.log)")

    def fill(self, bootstrap, topic, records, size, name):
        """A 1-partition topic of `records` records, value = 8-byte id (= its offset) padded to `size`."""
        return self._run(["fill", bootstrap, topic, str(records), str(size)], name, timeout=600)

    def consume(self, bootstrap, topic, group, consumers, total, warm, size, name):
        """`consumers` share consumers of `group` until every one of the `total` records is acknowledged;
        records/s over the records after the first `warm` (ShareBench's header). The client's CPU figures
        cover its measured phase: first measured record to the last acknowledgement confirmed."""
        res = self._run(["consume", bootstrap, topic, group, str(consumers), str(total), str(warm), str(size)],
                        name, timeout=900)
        ends = [t for t, line in self.clients.lines if RESULT_RE.search(line)]
        end = ends[-1] - res.get("result_delay_s", 0.0) if ends else None
        res.update(client_cpu_figures(self.clients, res["records"], res["ack_seconds"], res["bytes"], RESULT_RE,
                                      end=end))
        if res["ack_seconds"] > 0 and res.get("fetches", 0) > 0:
            res["fetches_per_sec"] = res["fetches"] / res["ack_seconds"]
        return res


def run_share(broker, clients, share, tag, cfg):
    """The share workloads on a freshly started broker (empty data dir, deleted after): fill the topic once,
    then one run per consumer count, each with a share group of its own. Returns {workload: metrics}."""
    res = {}
    stag = f"{tag}-share"
    total = cfg["n_share"] + cfg["n_share_warm"]
    log(f"[{stag}] {broker.name}: start for the share workloads ({total:,} x {SHARE_SIZE} B on one partition)")
    try:
        broker.start(clients, stag)
        clients.broker_pid = broker.pid
        b = broker.bootstrap
        fill = share.fill(b, SHARE_TOPIC, total, SHARE_SIZE, f"{stag}-{broker.name}-fill")
        for name, consumers in SHARE_WORKLOADS:
            dirty_mb, sync_s = settle_writeback()
            reset_hwm(broker.pid)
            c0, t0 = cpu_seconds(broker.pid), time.monotonic()
            w0, n0 = runqueue_wait(broker.pid)
            m = share.consume(b, SHARE_TOPIC, f"{name}-{tag}", consumers, total, cfg["n_share_warm"], SHARE_SIZE,
                              f"{stag}-{broker.name}-{name}")
            m["wall_s"] = time.monotonic() - t0
            m["broker_cpu_s"] = cpu_seconds(broker.pid) - c0
            # time the broker's threads were runnable but waited for its core (other processes there)
            w1, n1 = runqueue_wait(broker.pid)
            m["broker_runqueue_wait_s"], m["broker_timeslices"] = w1 - w0, n1 - n0
            # over the whole workload (JVM start, group join, warm-up records and close included): every
            # record of the topic was consumed once
            m["broker_cpu_us_per_record"] = 1e6 * m["broker_cpu_s"] / total
            m["broker_cpu_s_per_gib"] = m["broker_cpu_s"] / (total * SHARE_SIZE / 2**30)
            m["rss_peak_mb"] = proc_status(broker.pid)["VmHWM"]
            m["dirty_mb_before"], m["writeback_sync_s"] = dirty_mb, sync_s
            m["fill_records_per_sec"] = fill["records_per_sec"]
            res[name] = m
            wrong = {k: m[k] for k in SHARE_CHECKS if m.get(k)}
            log(f"[{stag}] {broker.name}: {name} {m['records_per_sec']:,.0f} records/s (all acknowledged "
                f"{m['last_ack_after_last_record_ms']:.0f} ms after the last record), client "
                f"{m.get('client_jvm_pct_of_core', 0):.0f}% of its core, broker {m.get('broker_pct_of_core', 0):.0f}%, "
                f"{m.get('records_per_fetch', 0):.0f} records per fetch, per consumer {m['per_consumer']}"
                + (f"; CHECK {wrong}" if wrong else "; every record once, none redelivered"))
    finally:
        clients.broker_pid = None
        broker.stop()
        shutil.rmtree(os.path.join(broker.rundir, f"{broker.name}-{stag}"), ignore_errors=True)
    return res
