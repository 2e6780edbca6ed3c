"""Controlled shutdown on a 3-node cluster of real processes (scripts/cluster), seen through
confluent-kafka's AdminClient:

- SIGTERM a broker that leads partitions of an RF 3 topic: its leaderships move to other ISR
  members, and its RF 1 partitions go offline (leader -1, as Kafka's controller does for a last
  replica in controlled shutdown), well before broker.session.timeout.ms would have fenced it
  (the time is measured and printed); the process exits soon after;
- the node restarts on its data dir (a clean restart), rejoins, and its RF 1 partitions come back
  with it.

Starts its own cluster. Env: SLUICE_BIN, CLUSTER_SCRIPT (scripts/cluster), CRASH_DIR (work dir),
CLUSTER_KIND (sluice or kafka), TOPIC_PREFIX. Runs with compat/python/.venv.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compat_common import Checks, env, print_client_version  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from failover import wait_for  # noqa: E402

HEARTBEAT_MS = 500  # broker.heartbeat.interval.ms
SESSION_TIMEOUT_MS = 3000  # broker.session.timeout.ms (Kafka's default is 9000)
# One heartbeat enters controlled shutdown at once, the approval comes after the other brokers
# reported the move (their next heartbeat); the metadata poll adds 50 ms. Half the session
# timeout: a fencing could not be that fast.
MOVE_BOUND_S = SESSION_TIMEOUT_MS / 1000 / 2


def cluster_cmd(script, workdir, *args, timeout=120):
    out = subprocess.run([script, *args, "--dir", workdir], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/cluster {' '.join(args)}: {out.stderr.strip()[-800:]}")
    return out.stdout.strip()


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                        "reconnect.backoff.max.ms": 200, "log_level": 2})


def leaders(a, topic, timeout=5):
    md = a.list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise RuntimeError(f"metadata for {topic}: {None if t is None else t.error}")
    return {p: (pm.leader, list(pm.isrs)) for p, pm in t.partitions.items()}




def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def main():
    checks = Checks()
    print_client_version()
    prefix = env("TOPIC_PREFIX", f"shutdown-{int(time.time())}")
    script = env("CLUSTER_SCRIPT")
    workdir = os.path.join(env("CRASH_DIR", "/tmp/sluice-shutdown"), "cluster")
    try:
        run(checks, script, workdir, prefix)
    finally:
        try:
            cluster_cmd(script, workdir, "stop")
        except Exception as e:  # noqa: BLE001
            print(f"stop: {e}")
    checks.finish()


def run(checks, script, workdir, prefix):
    args = ["start", "--nodes", "3"] + (["--kafka"] if env("CLUSTER_KIND", "sluice") == "kafka" else [])
    for s in (f"broker.heartbeat.interval.ms={HEARTBEAT_MS}", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}"):
        args += ["--set", s]
    bootstrap = cluster_cmd(script, workdir, *args).splitlines()[-1]
    addrs = bootstrap.split(",")
    print(f"cluster up: {bootstrap}")
    a = admin(bootstrap)
    rf3, rf1 = f"{prefix}-rf3", f"{prefix}-rf1"
    futs = a.create_topics([NewTopic(rf3, 6, 3), NewTopic(rf1, 3, 1)], request_timeout=10)
    for f in futs.values():
        f.result(timeout=15)
    wait_for("leaders with full ISRs", lambda: all(l > 0 and len(isr) == 3 for l, isr in leaders(a, rf3).values())
             and all(l > 0 for l, _ in leaders(a, rf1).values()), 20)
    before3, before1 = leaders(a, rf3), leaders(a, rf1)
    led = {n: [p for p, (l, _) in before3.items() if l == n] for n in (1, 2, 3)}
    victim = max(led, key=lambda n: len(led[n]))
    on_victim = [p for p, (l, _) in before1.items() if l == victim]
    checks.check("the victim leads RF 3 and RF 1 partitions", led[victim] and on_victim,
                 f"broker {victim}: rf3 {led[victim]}, rf1 {on_victim}")
    survivors = [n for n in (1, 2, 3) if n != victim]
    live = admin(",".join(addrs[n - 1] for n in survivors))
    leaders(live, rf3)  # connected before the stop
    with open(os.path.join(workdir, f"node-{victim}", "pid")) as f:
        pid = int(f.read().strip())

    t0 = time.monotonic()
    cluster_cmd(script, workdir, "kill", "--node", str(victim), "--signal", "TERM")

    def moved():
        now3, now1 = leaders(live, rf3, timeout=2), leaders(live, rf1, timeout=2)
        away = all(l > 0 and l != victim and victim not in isr for l, isr in now3.values())
        offline = all(now1[p][0] == -1 for p in on_victim)
        return (away and offline) and (now3, now1)

    try:
        now3, now1 = wait_for("leaders off the stopping broker", moved, SESSION_TIMEOUT_MS / 1000 + 10, every=0.05)
        took = time.monotonic() - t0
        print(f"SIGTERM to broker {victim}: its leaderships moved after {took * 1000:.0f} ms "
              f"(bound {MOVE_BOUND_S * 1000:.0f} ms; broker.session.timeout.ms {SESSION_TIMEOUT_MS})")
        checks.check("a clean stop moves the broker's leaderships well before the session timeout",
                     took <= MOVE_BOUND_S, f"{took:.2f} s, bound {MOVE_BOUND_S:.1f} s")
        checks.check("its RF 3 partitions lead from the remaining ISR",
                     all(l in survivors and sorted(isr) == survivors for l, isr in now3.values()), str(now3))
        checks.check("its RF 1 partitions are offline (leader -1)", True, str({p: now1[p] for p in on_victim}))
    except Exception as e:  # noqa: BLE001
        checks.check("a clean stop moves the broker's leaderships well before the session timeout", False, str(e))
    try:
        wait_for("the stopped process to exit", lambda: not pid_alive(pid), 15, every=0.02)
        exited = time.monotonic() - t0
        print(f"broker {victim} exited {exited * 1000:.0f} ms after SIGTERM")
        checks.check("the stopped broker exits within the session timeout", exited <= SESSION_TIMEOUT_MS / 1000,
                     f"{exited:.2f} s")
    except Exception as e:  # noqa: BLE001
        checks.check("the stopped broker exits within the session timeout", False, str(e))

    cluster_cmd(script, workdir, "restart", "--node", str(victim))
    back = admin(addrs[victim - 1])
    checks.run("after a clean restart its RF 1 partitions come back with it",
               lambda: "ok" if wait_for("RF 1 leaders back", lambda: all(
                   leaders(back, rf1)[p][0] == victim for p in on_victim), 20) else "no")


if __name__ == "__main__":
    main()
