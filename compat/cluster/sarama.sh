#!/usr/bin/env bash
# cluster/sarama: sarama's functional tests (build tag `functional`, module source at the version
# compat/go/sarama/go.mod pins, built by scripts/compat as $SARAMA_TEST_BIN) on 5 brokers behind toxiproxy,
# the environment their TestMain takes when TOXIPROXY_ADDR is set (functional_test.go): proxies kafka1..kafka5
# listening on 127.0.0.1:29091..29095, in front of the 5 brokers; topics test.1/test.4/test.64 (RF 3) created
# by TestMain; every test first resets the proxies and waits for full replication. Tests that drive
# `docker compose` skip themselves in such an existing environment.
#
# Here: a toxiproxy server ($TOXIPROXY_BIN, from the Go module proxy) on a free API port; scripts/cluster
# starts 5 nodes (sluice, or Kafka with CLUSTER_KIND=kafka), each with a second client listener EXTERNAL on
# 127.0.0.i:E advertised as 127.0.0.1:2909i, so clients go through the proxies while the brokers replicate
# over PLAINTEXT directly (as sarama's docker-compose does). Output: PASS/FAIL/SKIP per top-level test and
# the summary line (compat/tools/gotest_results.py); raw output in $COMPAT_LOG_DIR/cluster-sarama.raw.log.
# Env: SLUICE_BIN, CLUSTER_SCRIPT, CLUSTER_KIND, CRASH_DIR, SARAMA_DIR, SARAMA_TEST_BIN, TOXIPROXY_BIN,
# KAFKA_VERSION (what the tests are told the brokers speak; default 4.1.2), COMPAT_RUN (a -test.run regex),
# SARAMA_TIMEOUT (default 540s).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${SARAMA_DIR:?}" "${SARAMA_TEST_BIN:?}" "${TOXIPROXY_BIN:?}" "${CLUSTER_SCRIPT:?}"
WORK=${CRASH_DIR:-/tmp/sluice-cluster-sarama}
RAW=${COMPAT_LOG_DIR:-/tmp}/cluster-sarama.raw.log
echo "CLIENT_VERSION: sarama ${SARAMA_DIR##*@} functional tests"
rm -rf "$WORK/cluster"; mkdir -p "$WORK"

port_free() { python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))" "$1" 2>/dev/null; }
for p in 29091 29092 29093 29094 29095; do
  port_free "$p" || { echo "FAIL setup: 127.0.0.1:$p is taken (sarama's tests need 29091-29095)"; echo "0 passed, 1 failed"; exit 1; }
done
EXT=$(python3 - <<'PY'
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    try:
        others = []
        for i in range(2, 6):
            o = socket.socket(); o.bind((f"127.0.0.{i}", port)); others.append(o)
    except OSError:
        continue
    for o in others: o.close()
    s.close(); print(port); break
PY
)
API=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

TOXI_PID=""
cleanup() {
  "$CLUSTER_SCRIPT" stop --dir "$WORK/cluster" > /dev/null 2>&1 || true
  [ -n "$TOXI_PID" ] && kill "$TOXI_PID" 2> /dev/null
}
trap cleanup EXIT
"$TOXIPROXY_BIN" -host 127.0.0.1 -port "$API" > "$WORK/toxiproxy.log" 2>&1 &
TOXI_PID=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$API/version" > /dev/null && break; sleep 0.1; done
for i in 1 2 3 4 5; do
  curl -fs -X POST "http://127.0.0.1:$API/proxies" -d "{\"name\": \"kafka$i\", \"listen\": \"127.0.0.1:$((29090 + i))\", \"upstream\": \"127.0.0.$i:$EXT\", \"enabled\": true}" > /dev/null \
    || { echo "FAIL setup: toxiproxy proxy kafka$i ($WORK/toxiproxy.log)"; echo "0 passed, 1 failed"; exit 1; }
done
kind=(); [ "${CLUSTER_KIND:-sluice}" = kafka ] && kind=(--kafka)
# As sarama's docker-compose.yml configures its brokers (that file's rack-aware replica selector aside).
sets=(--set auto.create.topics.enable=false --set default.replication.factor=2 --set delete.topic.enable=true)
if ! "$CLUSTER_SCRIPT" start --dir "$WORK/cluster" --nodes 5 "${kind[@]}" --external-port "$EXT" --external-advertise-base 29090 \
    "${sets[@]}" > "$WORK/cluster-start.log" 2>&1; then
  echo "FAIL setup: the 5-node cluster did not come up: $(tail -3 "$WORK/cluster-start.log")"; echo "0 passed, 1 failed"; exit 1
fi
echo "5 ${CLUSTER_KIND:-sluice} nodes, EXTERNAL listeners on 127.0.0.1-5:$EXT behind toxiproxy 127.0.0.1:29091-29095 (API $API)"

# Tests that call `docker compose stop/start` or `docker logs` without skipping themselves in an existing
# environment: not run, reported as skipped (a failed docker call in TestConsumerFetchFollowerFailover left a
# producer goroutine that crashed the whole test binary).
DOCKER_ONLY=(TestConsumerFetchFollowerFailover TestFuncAdminListConsumerGroupOffsets TestFuncTxnProduceWithBrokerFailure
  TestFuncIdempotentBufferedSequence)
for t in "${DOCKER_ONLY[@]}"; do echo "SKIP $t: stops/starts a broker or reads its log with docker, which this environment does not have"; done
skip_re="^($(IFS='|'; echo "${DOCKER_ONLY[*]}"))\$"
(cd "$SARAMA_DIR" && TOXIPROXY_ADDR="http://127.0.0.1:$API" KAFKA_VERSION=${KAFKA_VERSION:-4.1.2} \
  "$SARAMA_TEST_BIN" -test.v -test.timeout "${SARAMA_TIMEOUT:-540s}" -test.run "${COMPAT_RUN:-^Test}" -test.skip "$skip_re" 2>&1) \
  | go tool test2json -t | GOTEST_RAW=$RAW python3 "$ROOT/compat/tools/gotest_results.py" \
  | awk -v n=${#DOCKER_ONLY[@]} '/^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { print $1, "passed,", $3, "failed,", $5 + n, "skipped"; next } { print }'
