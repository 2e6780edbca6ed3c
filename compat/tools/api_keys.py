"""Summarise which Kafka API keys and versions each compat suite's client sent.

Usage: api_keys.py SUITE_TIMES.tsv REQUESTS.log...
SUITE_TIMES.tsv: lines "<suite>\t<epoch start>" and "<suite>-end\t<epoch end>" (written by scripts/compat).
REQUESTS.log: Kafka's request log (kafka.request.logger at DEBUG, see scripts/kafka-reference --request-log).
Prints a markdown table per suite: API name (key), versions seen, request count, client ids.
"""
import collections
import datetime
import json
import re
import sys

# Inter-broker / KRaft-internal keys that clients never send.
INTERNAL = {4, 5, 6, 7, 52, 53, 54, 55, 56, 57, 58, 59, 62, 63, 64, 67, 70, 73, 80, 81, 82}
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] Completed request:(\{.*)$")


def main():
    times = {}
    with open(sys.argv[1]) as f:
        for line in f:
            name, ts = line.rstrip("\n").split("\t")
            times[name] = float(ts)
    windows = [(times[s], times[s + "-end"], s) for s in times if not s.endswith("-end") and s + "-end" in times]
    stats = collections.defaultdict(lambda: collections.defaultdict(lambda: [set(), 0, set()]))
    software = collections.defaultdict(set)
    for path in sys.argv[2:]:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m:
                    continue
                ts = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                try:
                    d = json.loads(m.group(2))
                except json.JSONDecodeError:
                    hm = re.search(r'"requestApiKey":(\d+),"requestApiVersion":(\d+).*?"clientId":"([^"]*)",'
                                   r'"requestApiKeyName":"([A-Z_]+)"', m.group(2))
                    if not hm:
                        continue
                    d = {"requestHeader": {"requestApiKey": int(hm.group(1)), "requestApiVersion": int(hm.group(2)),
                                           "clientId": hm.group(3), "requestApiKeyName": hm.group(4)}}
                ts -= float(d.get("totalTimeMs") or 0) / 1000.0  # when the request arrived
                suite = next((s for a, b, s in windows if a <= ts <= b), None)
                if suite is None:
                    continue
                if d.get("isForwarded") or d.get("listener") == "CONTROLLER":
                    continue  # the broker forwarding to its controller, not a client request
                h = d["requestHeader"]
                key = h["requestApiKey"]
                if key in INTERNAL or re.fullmatch(r"\d+", h.get("clientId") or ""):
                    continue  # broker-internal traffic (client id = a node id), e.g. auto-create forwarding
                e = stats[suite][(key, h.get("requestApiKeyName", "?"))]
                e[0].add(h["requestApiVersion"])
                e[1] += 1
                e[2].add(h.get("clientId") or "")
                req = d.get("request") or {}
                if key == 18 and req.get("clientSoftwareName"):
                    software[suite].add(f'{req["clientSoftwareName"]} {req.get("clientSoftwareVersion", "")}')
    print("# API keys and versions sent by each compat suite (from Kafka's request log)\n")
    for _a, _b, suite in sorted(windows):
        print(f"## {suite}\n")
        if software[suite]:
            print("ApiVersions client software: " + ", ".join(sorted(software[suite])) + "\n")
        print("| key | API | versions | requests | client ids |")
        print("|---:|---|---|---:|---|")
        for (key, name), (vers, count, cids) in sorted(stats[suite].items()):
            print(f"| {key} | {name} | {', '.join(map(str, sorted(vers)))} | {count} | {', '.join(sorted(cids))[:80]} |")
        print()


if __name__ == "__main__":
    main()
