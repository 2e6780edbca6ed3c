"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka's share consumer).

Starts its own broker (compat/crash's Broker: CRASH_BROKER=sluice with SLUICE_BIN, or kafka with
KAFKA_REFERENCE: Kafka 4.4.0 unless SHARE_KAFKA_VERSION says otherwise, formatted with
share.version=1), with a 2 s record lock
(group.share.record.lock.duration.ms; its minimum lowered to 1 s) and a delivery count limit of 3.
Every group reads from the earliest offset (share.auto.offset.reset set through a GROUP config
resource). Consumers acknowledge explicitly and commit with commit_sync. Checks:
1. three consumers share one partition of 300 records: a record whose offset % 10 == 3 is RELEASEd on
   its first delivery, one whose offset % 10 == 7 REJECTed, the rest ACCEPTed; no record is held by two
   consumers at once, released records come back with a higher delivery count, rejected ones never
   come back, every other record is accepted exactly once, more than one consumer did work;
2. a poison record that is always released is delivered exactly 3 times (counts 1, 2, 3), then
   archived, and the record after it is still delivered;
3. a consumer process killed with -9 while it holds records: they are delivered to another consumer
   of the group with delivery count 2, no sooner than the lock duration after they were acquired;
4. a group with share.isolation.level=read_committed gets the committed records only, in order, and
   nothing at or after an open transaction until it commits; a read_uncommitted group gets all;
5. the broker killed with -9 and restarted: records accepted before the kill are never delivered
   again, every other record is.
Prints one PASS/FAIL line per check and "N passed, N failed". Runs with compat/python/.venv.
`share.py --hold BOOTSTRAP TOPIC GROUP` is the consumer process check 3 kills.
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
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "crash"))
from compat_common import Checks, env, free_port, log_error_cb, print_client_version  # noqa: E402
from crash import Broker  # noqa: E402
from confluent_kafka import Producer, ShareConsumer  # noqa: E402
from confluent_kafka._model import AcknowledgeType  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewTopic, ResourceType)

LOCK_MS = 2000
DELIVERY_LIMIT = 3
BROKER_PROPS = {
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": LOCK_MS,
    "group.share.delivery.count.limit": DELIVERY_LIMIT,
}
RECORDS = 300


def consumer(bootstrap, group):
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "error_cb": log_error_cb})
    return c


def setup_topic(bootstrap, topic, group, values):
    """Creates `topic` (one partition), sets `group` to read from the earliest offset, and writes
    `values` in order (one record each). Returns 'ok ...' or an error."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                        operation_timeout=30)[topic].result(timeout=60)
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=30)
    written = produce(bootstrap, topic, values)
    return f"{written}, group {group} from the earliest offset" if written.startswith("ok") else written


def produce(bootstrap, topic, values, pause=0.0):
    """Writes `values` to partition 0 of `topic` in order; with `pause`, one batch per record."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "error_cb": log_error_cb})
    failed = []
    for v in values:
        p.produce(topic, value=v.encode(), partition=0,
                  on_delivery=lambda err, _m: err is not None and failed.append(err))
        p.poll(0)
        if pause:
            p.flush(30)
            time.sleep(pause)
    left = p.flush(60)
    if left or failed:
        return f"{left} records unacknowledged, errors {failed[:3]}"
    return f"ok {topic}: {len(values)} records"


def poll_records(c, timeout=1.0):
    """One poll's records, client errors logged and left out."""
    out = []
    for m in c.poll(timeout):
        if m.error():
            print(f"  [poll error] {m.error()}", flush=True)
            continue
        out.append(m)
    return out


def shared_partition(bootstrap, topic, group):
    """Check 1: three consumers on threads share the partition."""
    lock = threading.Lock()
    holder, deliveries, accepted, rejected, violations = {}, {}, set(), set(), []
    per_consumer = {}
    stop = threading.Event()

    def member(name):
        c = consumer(bootstrap, group)
        c.subscribe([topic])
        try:
            while not stop.is_set():
                ms = poll_records(c, 0.5)
                for m in ms:
                    off, count = m.offset(), m.delivery_count()
                    with lock:
                        if off in holder:
                            violations.append(f"offset {off} held by {holder[off]} and {name}")
                        holder[off] = name
                        seen = deliveries.setdefault(off, [])
                        if seen and count <= seen[-1]:
                            violations.append(f"offset {off} delivered again with count {count} after {seen}")
                        seen.append(count)
                        if off in accepted or off in rejected:
                            violations.append(f"offset {off} delivered after it was acknowledged")
                        per_consumer[name] = per_consumer.get(name, 0) + 1
                    if off % 10 == 3 and count == 1:
                        kind = AcknowledgeType.RELEASE
                    elif off % 10 == 7:
                        kind = AcknowledgeType.REJECT
                    else:
                        kind = AcknowledgeType.ACCEPT
                    with lock:
                        del holder[off]
                    c.acknowledge(m, kind)
                    with lock:
                        if kind == AcknowledgeType.ACCEPT:
                            accepted.add(off)
                        elif kind == AcknowledgeType.REJECT:
                            rejected.add(off)
                if ms:
                    for tp, err in c.commit_sync(30).items():
                        if err is not None:
                            violations.append(f"{name}: commit of {tp}: {err}")
                with lock:
                    if len(accepted) + len(rejected) == RECORDS:
                        stop.set()
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(f"c{i}",), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    # The records come while all three poll, one batch each, so that each fetch finds a few: written
    # before, they would all be acquired by the first consumer's first fetch.
    time.sleep(3)
    produced = produce(bootstrap, topic, [str(i) for i in range(RECORDS)], pause=0.005)
    if not produced.startswith("ok"):
        stop.set()
        return {"records written while the consumers poll": (False, produced)}
    stop.wait(120)
    stop.set()
    for t in threads:
        t.join(30)
    results = {}
    released = [o for o in range(RECORDS) if o % 10 == 3]
    results["every record accepted or rejected"] = (
        len(accepted) + len(rejected) == RECORDS, f"{len(accepted)} accepted, {len(rejected)} rejected")
    results["no record held by two consumers at once"] = (not violations, "; ".join(violations[:3]))
    again = [o for o in released if len(deliveries.get(o, [])) >= 2 and deliveries[o][-1] >= 2]
    results["released records redelivered with a higher delivery count"] = (
        len(again) == len(released), f"{len(again)} of {len(released)}")
    rejected_once = [o for o in rejected if len(deliveries.get(o, [])) == 1]
    results["rejected records never delivered again"] = (
        len(rejected) == RECORDS // 10 and len(rejected_once) == len(rejected),
        f"{len(rejected)} rejected, {len(rejected_once)} delivered once")
    others = [o for o in range(RECORDS) if o % 10 not in (3, 7)]
    once = [o for o in others if deliveries.get(o) == [1]]
    results["every other record delivered and accepted once"] = (
        len(once) == len(others), f"{len(once)} of {len(others)}")
    busy = [n for n, k in per_consumer.items() if k > 0]
    results["more than one consumer did work"] = (len(busy) > 1, str(per_consumer))
    return results


def poison(bootstrap, topic, group):
    """Check 2: a record that is always released is archived after DELIVERY_LIMIT deliveries."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    counts, after, deadline = [], [], time.time() + 60
    quiet_until = None
    try:
        while time.time() < deadline:
            for m in poll_records(c, 0.5):
                if m.offset() == 0:
                    counts.append(m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    after.append(m.offset())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync(30)
            if len(counts) >= DELIVERY_LIMIT and after and quiet_until is None:
                quiet_until = time.time() + 2 * LOCK_MS / 1000  # would it come back?
            if quiet_until is not None and time.time() > quiet_until:
                break
    finally:
        c.close()
    if counts != list(range(1, DELIVERY_LIMIT + 1)):
        return f"the poison record's delivery counts were {counts}, want 1..{DELIVERY_LIMIT}"
    if after != [1]:
        return f"records after the poison record delivered as {after}, want [1]"
    return f"ok delivered {len(counts)} times (counts {counts}), then archived; offset 1 delivered once"


def hold(bootstrap, topic, group):
    """The process check 3 kills: acquires records, prints their offsets, never acknowledges."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    deadline = time.time() + 60
    while time.time() < deadline:
        ms = poll_records(c, 0.5)
        if ms:
            print("HELD " + " ".join(str(m.offset()) for m in ms), flush=True)
            time.sleep(600)  # killed with -9 meanwhile
    print("HELD none", flush=True)


def killed_consumer(bootstrap, topic, group, n):
    """Check 3: records held by a consumer killed with -9 go to another consumer after the lock."""
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--hold", bootstrap, topic, group],
                             stdout=subprocess.PIPE, text=True)
    held, acquired_at = [], None
    try:
        line = child.stdout.readline().strip()
        acquired_at = time.time()
        if not line.startswith("HELD ") or line == "HELD none":
            return f"the holding consumer acquired nothing ({line!r})"
        held = [int(x) for x in line[5:].split()]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    first_held_at, got, deadline = None, {}, time.time() + 60
    try:
        while len(got) < n and time.time() < deadline:
            ms = poll_records(c, 0.5)
            for m in ms:
                got.setdefault(m.offset(), m.delivery_count())
                if m.offset() in held and first_held_at is None:
                    first_held_at = time.time()
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if ms:
                c.commit_sync(30)
    finally:
        c.close()
    missing = [o for o in range(n) if o not in got]
    if missing:
        return f"{len(missing)} of {n} records never delivered after the kill (first {missing[:5]})"
    wrong = [o for o in held if got[o] != 2]
    if wrong:
        return f"held records redelivered with counts {[(o, got[o]) for o in wrong[:5]]}, want 2"
    others = [o for o in range(n) if o not in held and got[o] != 1]
    if others:
        return f"records the killed consumer never had came with counts {[(o, got[o]) for o in others[:5]]}"
    waited = first_held_at - acquired_at
    # The lock runs from the acquisition, which came a little before the child printed it.
    if waited < LOCK_MS / 1000 - 0.5:
        return f"a held record came back {waited:.2f} s after it was acquired, before the {LOCK_MS} ms lock ran out"
    return (f"ok {len(held)} held records (offsets {held[0]}..{held[-1]}) redelivered with count 2, "
            f"{waited:.2f} s after they were acquired; all {n} records delivered")


def broker_restart(broker, bootstrap, topic, group, n):
    """Check 4: accepted records survive a kill -9 of the broker."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    accepted, deadline = set(), time.time() + 60
    try:
        while len(accepted) < n // 2 and time.time() < deadline:
            ms = poll_records(c, 0.5)
            for m in ms:
                kind = AcknowledgeType.ACCEPT if m.offset() < n // 2 else AcknowledgeType.RELEASE
                c.acknowledge(m, kind)
            if ms:
                results = c.commit_sync(30)
                if all(err is None for err in results.values()):
                    accepted.update(m.offset() for m in ms if m.offset() < n // 2)
    finally:
        c.close()
    if len(accepted) < n // 2:
        return f"only {len(accepted)} of {n // 2} records accepted before the kill"
    broker.kill9()
    broker.start()
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    again, got, deadline = [], set(), time.time() + 90
    try:
        while len(got) < n - n // 2 and time.time() < deadline:
            ms = poll_records(c, 0.5)
            for m in ms:
                if m.offset() in accepted:
                    again.append(m.offset())
                else:
                    got.add(m.offset())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if ms:
                c.commit_sync(30)
    finally:
        c.close()
    if again:
        return f"{len(again)} records accepted before the kill delivered again (first {sorted(again)[:5]})"
    want = set(range(n // 2, n))
    if got != want:
        return f"after the restart got {len(got)} records, missing {sorted(want - got)[:5]}"
    return f"ok {len(accepted)} accepted before the kill never came back; the other {len(got)} all delivered"


def values_until_quiet(c, want, quiet_s=3.0, limit_s=60.0):
    """Accepts what `c` is delivered until it has `want` values (then `quiet_s` more, to catch
    anything extra) or `limit_s` passed; returns the values in delivery order."""
    got, deadline, quiet_until = [], time.time() + limit_s, None
    while time.time() < deadline:
        ms = poll_records(c, 0.5)
        for m in ms:
            got.append(m.value().decode())
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if ms:
            c.commit_sync(30)
        if quiet_until is None and len(got) >= want:
            quiet_until = time.time() + quiet_s
        if quiet_until is not None and time.time() > quiet_until:
            break
    return got


def read_committed(bootstrap, topic):
    """Check 5: share.isolation.level=read_committed never delivers aborted data nor anything at
    or past an open transaction; read_uncommitted delivers everything."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                        operation_timeout=30)[topic].result(timeout=60)
    for group, level in (("g-rc", "read_committed"), ("g-ru", "read_uncommitted")):
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.isolation.level", level, incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([res]).values():
            f.result(timeout=30)
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-rc", "error_cb": log_error_cb})
    tx.init_transactions(30)

    def transaction(values, commit):
        tx.begin_transaction()
        for v in values:
            tx.produce(topic, value=v.encode(), partition=0)
        tx.flush(30)
        if commit is True:
            tx.commit_transaction(30)
        elif commit is False:
            tx.abort_transaction(30)

    transaction(["c0", "c1", "c2"], True)
    transaction(["a0", "a1"], False)
    transaction(["c3"], True)
    written = produce(bootstrap, topic, ["p0"])
    if not written.startswith("ok"):
        return written
    transaction(["o0"], None)  # left open: the last stable offset stays before it
    written = produce(bootstrap, topic, ["p1"])
    if not written.startswith("ok"):
        return written
    rc, ru = consumer(bootstrap, "g-rc"), consumer(bootstrap, "g-ru")
    rc.subscribe([topic])
    ru.subscribe([topic])
    try:
        before = values_until_quiet(rc, 5)
        want_before = ["c0", "c1", "c2", "c3", "p0"]
        if before != want_before:
            return f"read_committed with a transaction open got {before}, want {want_before}"
        tx.commit_transaction(30)
        after = values_until_quiet(rc, 2)
        if after != ["o0", "p1"]:
            return f"read_committed after the commit got {after}, want ['o0', 'p1']"
        everything = values_until_quiet(ru, 9)
        want_all = ["c0", "c1", "c2", "a0", "a1", "c3", "p0", "o0", "p1"]
        if everything != want_all:
            return f"read_uncommitted got {everything}, want {want_all}"
    finally:
        rc.close()
        ru.close()
    return ("ok read_committed: " + " ".join(before) + " before the open transaction's commit, "
            + " ".join(after) + " after; read_uncommitted: all 9, the aborted a0 a1 included")


def main():
    kind = env("CRASH_BROKER", "sluice")
    # Against Kafka: the newest release, whose share groups are production-ready (4.2+). Kafka 4.1.2's
    # preview share groups with this client spread nothing over three consumers, redeliver a killed
    # consumer's records with delivery count 1 and time out its explicit acknowledgements.
    os.environ["KAFKA_VERSION"] = env("SHARE_KAFKA_VERSION", "4.4.0")
    ch = Checks()
    print_client_version()
    base = (env("CRASH_DIR") or tempfile.mkdtemp(prefix="sluice-crash-")) + "-share"
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    port = free_port()
    broker = Broker(kind, base, port, props=BROKER_PROPS, kafka_features="share.version=1")
    bootstrap = f"127.0.0.1:{port}"
    print(f"broker={kind} bootstrap={bootstrap} dir={base}", flush=True)
    try:
        if not ch.run(f"start {kind}", broker.start):
            ch.finish()
        topics = {
            "shared": [],  # written while the consumers poll
            "poison": ["poison", "after"],
            "killed": [str(i) for i in range(50)],
            "restart": [str(i) for i in range(100)],
        }
        for name, values in topics.items():
            ch.run(f"setup {name}", lambda n=name, v=values: setup_topic(bootstrap, f"share-{n}", f"g-{n}", v))
        for check, (ok, detail) in shared_partition(bootstrap, "share-shared", "g-shared").items():
            ch.check(check, ok, detail)
        ch.run("a poison record is archived at the delivery count limit",
               lambda: poison(bootstrap, "share-poison", "g-poison"))
        ch.run("records held by a consumer killed with -9 are redelivered after the lock",
               lambda: killed_consumer(bootstrap, "share-killed", "g-killed", 50))
        ch.run("read_committed share groups skip aborted data and stop at an open transaction",
               lambda: read_committed(bootstrap, "share-txn"))
        ch.run("accepted records survive a broker kill -9 and restart",
               lambda: broker_restart(broker, bootstrap, "share-restart", "g-restart", 100))
    finally:
        broker.stop()
    ch.finish()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--hold":
        hold(*sys.argv[2:])
    else:
        main()
