"""Times what group admin client tests spend their time on (not a suite: prints seconds).

    compat/python/.venv/bin/python compat/tools/group_timing.py BOOTSTRAP [N] [classic|consumer]

N consumers (default 10), each subscribing in a new group of its own and polled until it has an
assignment (FindCoordinator, JoinGroup, SyncGroup: a new classic group waits
group.initial.rebalance.delay.ms here), then AdminClient list_consumer_groups, describe (while
active), close, delete_consumer_groups. Run it against both brokers with the same settings.
"""
import sys
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic


def main():
    bootstrap = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    protocol = sys.argv[3] if len(sys.argv) > 3 else "classic"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tag = str(int(time.time()))
    topic = "timing-" + tag
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result()
    time.sleep(1)
    groups = [f"timing-{tag}-{i}" for i in range(n)]
    consumers = []
    t = time.time()
    for g in groups:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": g, "group.protocol": protocol})
        c.subscribe([topic])
        while not c.assignment():
            c.poll(0.05)
        consumers.append(c)
    print(f"join {time.time() - t:.2f}s ({n} new groups)")
    t = time.time()
    admin.list_consumer_groups(request_timeout=30).result()
    print(f"list {time.time() - t:.2f}s")
    t = time.time()
    for f in admin.describe_consumer_groups(groups, request_timeout=30).values():
        f.result()
    print(f"describe {time.time() - t:.2f}s")
    t = time.time()
    for c in consumers:
        c.close()
    print(f"close {time.time() - t:.2f}s")
    t = time.time()
    for f in admin.delete_consumer_groups(groups, request_timeout=30).values():
        f.result()
    print(f"delete {time.time() - t:.2f}s")


if __name__ == "__main__":
    main()
