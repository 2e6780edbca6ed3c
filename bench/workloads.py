"""The workloads' definitions: record counts per mode, the produce shapes, the librdkafka and cluster
workloads' parameters. Pure data: nothing here starts a process."""


def settings(quick):
    if quick:
        return {"n_1k": 200_000, "n_100b": 500_000, "n_warmup": 50_000, "lat_rate": 1000, "lat_secs": 10, "lat_warmup": 2,
                "lat_size": 1024, "n_e2e_tool": 3_000, "n_e2e_tool_warmup": 1_000, "idle_settle_s": 3, "n_go_1k": 2_500_000, "n_go_100b": 7_000_000,
                "p10k_partitions": 10_000, "p10k_per_partition": 10, "p10k_size": 100, "p10k_step": 5_000,
                "n_rdk": 300_000, "n_share": 150_000, "n_share_warm": 50_000}
    return {"n_1k": 1_000_000, "n_100b": 3_000_000, "n_warmup": 200_000, "lat_rate": 1000, "lat_secs": 30, "lat_warmup": 5,
            "lat_size": 1024, "n_e2e_tool": 10_000, "n_e2e_tool_warmup": 2_000, "idle_settle_s": 5, "n_go_1k": 4_000_000, "n_go_100b": 12_000_000,
            "p10k_partitions": 10_000, "p10k_per_partition": 100, "p10k_size": 100, "p10k_step": 5_000,
            "n_rdk": 1_048_576, "n_share": 800_000, "n_share_warm": 200_000}


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


E2E_TOOL_TOPIC = "e2e-tool"  # EndToEndLatency's topic (one partition)
GO_CONSUME_TOPIC = "g1k-acks1"  # consume-1k-go reads what produce-1k-acks1-go wrote


# records and bytes each workload moves (for CPU per record and per GiB)
def workload_volume(cfg):
    vol = {name: (n, n * size) for name, _, n, size, _, _ in produce_workloads(cfg)}
    vol.update({name: (n, n * size) for name, _, n, size, _ in go_produce_workloads(cfg)})
    vol["consume-1k-go"] = (cfg["n_go_1k"], cfg["n_go_1k"] * 1024)
    vol["consume-1k"] = (cfg["n_1k"], cfg["n_1k"] * 1024)
    vol["consume-1k-tool"] = (cfg["n_1k"], cfg["n_1k"] * 1024)
    vol["latency-e2e-tool"] = (cfg["n_e2e_tool"] + cfg["n_e2e_tool_warmup"],
                               (cfg["n_e2e_tool"] + cfg["n_e2e_tool_warmup"]) * cfg["lat_size"])
    n_lat = cfg["lat_rate"] * (cfg["lat_secs"] + cfg["lat_warmup"])
    vol["latency-e2e-1k"] = (n_lat, n_lat * cfg["lat_size"])
    return vol


# librdkafka's rdkafka_performance (the client under kcat, confluent-kafka and most non-JVM clients): each
# workload on a broker started fresh for it, with its own empty data dir. (name, partitions, rdkafka args)
# Both at librdkafka's producer defaults otherwise (linger.ms 5, batch.size 1 MB, 1M messages queued, 5
# requests in flight per connection when idempotent, 1,000,000 otherwise).
RDKAFKA_WORKLOADS = [
    ("produce-1k-acksall-idem-1p-rdkafka", 1, ["-p", "0", "-a", "-1", "-X", "enable.idempotence=true"]),
    ("produce-1k-acks1-rdkafka", 6, ["-a", "1"]),
]
RDKAFKA_SIZE = 1024


CLUSTER_TOPIC = "rf3"
CLUSTER_PARTITIONS = 6
CLUSTER_MIN_ISR = 2


# Share groups (KIP-932, bench/share.py): one partition holding n_share_warm + n_share records of SHARE_SIZE
# bytes; each consumer count consumes all of them as a share group of its own, the clock starting once
# n_share_warm records were seen. (name, share consumers)
SHARE_TOPIC = "share-1k"
SHARE_SIZE = 1024
SHARE_WORKLOADS = [(f"share-consume-1k-{n}c", n) for n in (1, 3, 6)]
# bench/java/ShareBench's correctness counts: a record delivered again, one delivered with a delivery count
# above 1, a record not at the offset of its id, a value of the wrong size or id, an acknowledgement the
# broker answered with an error. Any above 0 is a redelivery or a wrong answer.
SHARE_CHECKS = ("duplicates", "redelivered", "offset_mismatch", "bad_values", "ack_errors")
# Share groups are production-ready from Kafka 4.2 on; an older reference (4.1.2, the bench's) runs them
# as a preview behind share.version, so the share rows run against this release instead.
SHARE_KAFKA_MIN = (4, 2)
SHARE_KAFKA_DEFAULT = "4.4.0"
