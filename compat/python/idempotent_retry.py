"""confluent-kafka idempotent producer through a proxy that cuts connections during produce traffic.

Needs the broker to advertise the proxy address. Env: BOOTSTRAP (= the proxy address, 127.0.0.1:P),
PROXY_UPSTREAM (the broker's real listener, 127.0.0.1:B). Every record must be stored exactly once.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compat_common import (Checks, consume_all, create_topic, env, log_error_cb, print_client_version,  # noqa: E402
                           verify_records)
from confluent_kafka import Producer  # noqa: E402
from cutproxy import CutProxy  # noqa: E402


def main():
    bootstrap = env("BOOTSTRAP")
    upstream = env("PROXY_UPSTREAM")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    n = int(env("IDEMPOTENT_RECORDS", "20000"))
    print_client_version()
    ch = Checks()
    if not bootstrap or not upstream:
        ch.check("environment", False, "needs BOOTSTRAP=<proxy 127.0.0.1:P> and PROXY_UPSTREAM=<broker 127.0.0.1:B>; "
                 "the broker must advertise the proxy address")
        ch.finish()
    phost, pport = bootstrap.rsplit(":", 1)
    uhost, uport = upstream.rsplit(":", 1)
    if phost not in ("127.0.0.1", "localhost") or uhost not in ("127.0.0.1", "localhost"):
        ch.check("environment", False, "proxy and upstream must be on 127.0.0.1")
        ch.finish()
    # Produce requests are counted over all connections; cut after #4, #10, #18 and mid-request at #25
    # (20,000 records in batches of <=100 make >= 34 requests even if every request carries 6 partitions).
    plan = {4: "after", 10: "after", 18: "after", 25: "partial"}
    proxy = CutProxy(int(pport), "127.0.0.1", int(uport), plan)
    proxy.start()
    print(f"proxy 127.0.0.1:{pport} -> {upstream}, cut plan {plan}, records={n}", flush=True)
    topic = f"{prefix}-python-idempotent"
    try:
        if not ch.run("AdminClient.create_topics(6 partitions) through the proxy", lambda: create_topic(bootstrap, topic)):
            ch.finish()
        expected = {}
        acked = {}
        errors = []

        def produce():
            p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                          "linger.ms": 2, "batch.num.messages": 100, "message.timeout.ms": 120000,
                          "retry.backoff.ms": 50, "reconnect.backoff.ms": 50, "error_cb": log_error_cb})

            def cb(err, msg):
                if err is not None:
                    errors.append(f"{msg.value()[:40]!r}: {err}")
                else:
                    acked[msg.value()] = (msg.partition(), msg.offset())

            t = time.time()
            for i in range(n):
                k = f"k{i % 211}".encode()
                v = f"unique-{i:06d}".encode()
                expected[v] = k
                while True:
                    try:
                        p.produce(topic, key=k, value=v, on_delivery=cb)
                        break
                    except BufferError:
                        p.poll(0.05)
                if i % 100 == 99:
                    p.poll(0.01)  # pace the producer so there are many produce requests to cut
            left = p.flush(180)
            if left:
                return f"{left} records undelivered after flush"
            if errors:
                return f"{len(errors)} delivery errors, first: {errors[0]}"
            if len(acked) != n:
                return f"{len(acked)} acks, want {n}"
            return f"ok {n} acked in {time.time() - t:.1f}s over {proxy.produce_requests} produce requests"

        produced = ch.run(f"idempotent producer (acks=all) {n} records with connection cuts, all acknowledged", produce)
        full = [c for c in proxy.cuts if c[0] == "after"]
        ch.check("proxy cut connections right after forwarding whole produce requests (>=2) and mid-request",
                 len(full) >= 2 and len(proxy.cuts) >= 3,
                 f"cuts {proxy.cuts}, {proxy.connections} connections, {proxy.produce_requests} produce requests"
                 + (f", proxy errors {proxy.errors[:3]}" if proxy.errors else ""))
        if produced:
            recs = consume_all(bootstrap, topic, expected=n)
            ch.check("every record stored exactly once (no loss, no duplicate from retries), contiguous offsets",
                     *(lambda r: (r.startswith("ok"), r))(verify_records(recs, expected, acked)))
    finally:
        proxy.stop()
    ch.finish()


if __name__ == "__main__":
    main()
