"""The librdkafka (confluent-kafka) half of compat/cluster/clients.py: an acks=all idempotent producer and
a reader, speaking the line protocol the harness parses (the same as the Java and franz-go programs):

  produce BOOTSTRAP TOPIC COUNT RATE  ->  "A <id> <partition> <offset>" per acknowledged record,
                                          "E <id> <error>" per failed one, then "DONE acked=N failed=N"
  consume BOOTSTRAP TOPIC             ->  "R <partition> <offset> <id>" per record up to each partition's
                                          high watermark at the start, then "DONE read=N"

The value of record i is the decimal id i; RATE paces the producer (records per second).
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

OUT = sys.stdout


def produce(bootstrap, topic, count, rate):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "delivery.timeout.ms": 120000, "log_level": 3})
    tally = {"acked": 0, "failed": 0}

    def on_delivery(err, msg, i):
        if err is not None:
            tally["failed"] += 1
            OUT.write(f"E {i} {err}\n")
        else:
            tally["acked"] += 1
            OUT.write(f"A {i} {msg.partition()} {msg.offset()}\n")

    start = time.monotonic()
    for i in range(count):
        if i % 100 == 0:
            wait = start + i / rate - time.monotonic()
            if wait > 0:
                p.poll(wait)
            OUT.flush()
        while True:
            try:
                p.produce(topic, str(i).encode(), on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i))
                break
            except BufferError:  # the local queue is full (a leader is down): serve callbacks, then retry
                p.poll(0.1)
        p.poll(0)
    while len(p) > 0:
        p.flush(1)
    OUT.write(f"DONE acked={tally['acked']} failed={tally['failed']}\n")
    OUT.flush()


def consume(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"clients-{topic}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "log_level": 3})
    md = c.list_topics(topic, timeout=30)
    want = {}
    for pid in md.topics[topic].partitions:
        low, high = c.get_watermark_offsets(TopicPartition(topic, pid), timeout=30)
        if high > 0:
            want[pid] = high
    c.assign([TopicPartition(topic, pid, 0) for pid in want])  # offset 0: no group offsets involved
    read = 0
    deadline = time.monotonic() + 120
    while want:
        if time.monotonic() > deadline:
            OUT.flush()
            sys.exit(f"still waiting for partitions {want} after 120 s")
        for m in c.consume(1000, timeout=1):
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    print(f"fetch error: {m.error()}", file=sys.stderr)
                continue
            end = want.get(m.partition())
            if end is None or m.offset() >= end:
                continue
            read += 1
            OUT.write(f"R {m.partition()} {m.offset()} {m.value().decode()}\n")
            if m.offset() + 1 >= end:
                del want[m.partition()]
    c.close()
    OUT.write(f"DONE read={read}\n")
    OUT.flush()


def main():
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "produce":
        produce(a[1], a[2], int(a[3]), int(a[4]))
    elif len(a) == 3 and a[0] == "consume":
        consume(a[1], a[2])
    else:
        sys.exit("usage: produce BOOTSTRAP TOPIC COUNT RATE | consume BOOTSTRAP TOPIC")


if __name__ == "__main__":
    main()
