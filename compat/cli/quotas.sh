#!/usr/bin/env bash
# Client quotas as a Kafka user sets and meets them (the Kafka jars in $KAFKA_LIBS) against
# $BOOTSTRAP: ConfigCommand (kafka-configs.sh --alter --add-config producer_byte_rate=...
# --entity-type clients) sets a producer and a consumer byte rate for two client ids and
# describes them; ProducerPerformance (kafka-producer-perf-test.sh) then sends 4 MB with the
# throttled client id and 4 MB with another, ConsumerPerformance reads 4 MB with a throttled
# consumer client id and with another. Each run reports its MB/s and, with --print-metrics, the
# client's throttle metric (produce-throttle-time-avg / fetch-throttle-time-avg: the
# throttle_time_ms the broker answered). Checks: the quota'd runs were throttled and held
# below 3x their quota over the run (Kafka's 11 one-second windows let a new client burst ~10 s
# of quota first, so a 4 MB run at 256 KiB/s averages about 0.4 MB/s), the others were not
# throttled and ran over 4x faster. Prints every measurement and "N passed, N failed".
set -uo pipefail
BOOTSTRAP=${BOOTSTRAP:-127.0.0.1:9092}
PREFIX=${TOPIC_PREFIX:-compat-$(date +%s)}
LIBS=${KAFKA_LIBS:-$(cd "$(dirname "$0")/../.." && pwd)/.tools/kafka/libs}
command -v java >/dev/null || { echo "FAIL java not installed"; echo "0 passed, 1 failed"; exit 1; }
ls "$LIBS"/kafka-tools-*.jar >/dev/null 2>&1 || { echo "FAIL no Kafka jars in $LIBS (scripts/kafka-reference libs)"; echo "0 passed, 1 failed"; exit 1; }
KV=$(basename "$(ls "$LIBS"/kafka-tools-[0-9]*.jar | head -1)" .jar)
echo "CLIENT_VERSION: ${KV/kafka-tools-/kafka CLI }"
echo "bootstrap=$BOOTSTRAP prefix=$PREFIX"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
passed=0; failed=0
pass() { passed=$((passed+1)); echo "PASS $*"; }
fail() { failed=$((failed+1)); echo "FAIL $*"; }

run() {  # run NAME CLASS ARGS...: output (stack frames dropped) in $TMP/NAME
  local name=$1; shift
  timeout 180 java -Xmx512m -Dlog4j2.level=error -cp "$LIBS/*" "$@" > "$TMP/$name.raw" 2>&1 < /dev/null
  local rc=$?
  grep -v $'^\tat \|^SLF4J' "$TMP/$name.raw" > "$TMP/$name"
  return $rc
}
expect() {  # expect NAME LABEL REGEX
  if grep -qE -- "$3" "$TMP/$1"; then pass "$2"; else fail "$2: wanted /$3/, got: $(head -c 600 "$TMP/$1" | tr '\n' '|')"; fi
}
CONFIG_COMMAND=kafka.admin.ConfigCommand
unzip -l "$(ls "$LIBS"/kafka-tools-[0-9]*.jar | head -1)" 2>/dev/null | grep -q ' org/apache/kafka/tools/ConfigCommand.class$' \
  && CONFIG_COMMAND=org.apache.kafka.tools.ConfigCommand
config() { run "$1" "$CONFIG_COMMAND" --bootstrap-server "$BOOTSTRAP" "${@:2}"; }
# metric NAME METRIC: the value of the first "group:METRIC:{tags} : value" line --print-metrics wrote
metric() { awk -F' : ' -v m=":$2:" 'index($1, m) { gsub(/ /, "", $2); print $2; exit }' "$TMP/$1"; }
# ge A B / lt A B: float comparisons
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

QUOTA=262144   # 256 KiB/s
QUOTA_MB=$(awk -v q=$QUOTA 'BEGIN { print q / 1048576 }')
T=$PREFIX-quotas
SLOW=$PREFIX-slow
READER=$PREFIX-reader
run topic org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create --topic "$T" --partitions 1
expect topic "topic created" "Created topic $T."
config alter-p --alter --add-config "producer_byte_rate=$QUOTA" --entity-type clients --entity-name "$SLOW"
expect alter-p "kafka-configs --alter producer_byte_rate for a client id" "Completed updating config for client $SLOW"
config alter-c --alter --add-config "consumer_byte_rate=$QUOTA" --entity-type clients --entity-name "$READER"
expect alter-c "kafka-configs --alter consumer_byte_rate for a client id" "Completed updating config for client $READER"
config describe --describe --entity-type clients --entity-name "$SLOW"
expect describe "kafka-configs --describe shows the quota" "producer_byte_rate=$QUOTA(\.0)?"

perf() {  # perf NAME CLIENT_ID: 4,000 records of 1,000 bytes as fast as the client goes
  run "$1" org.apache.kafka.tools.ProducerPerformance --topic "$T" --num-records 4000 --record-size 1000 \
    --throughput -1 --print-metrics --producer-props "bootstrap.servers=$BOOTSTRAP" "client.id=$2" acks=1 \
    linger.ms=5 batch.size=65536
}
# mbps NAME: the MB/sec of the final summary line ("4000 records sent, X records/sec (Y MB/sec), ...")
mbps() { grep -E '^[0-9]+ records sent' "$TMP/$1" | tail -1 | sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/'; }

perf produce-slow "$SLOW"
slow=$(mbps produce-slow); slow_t=$(metric produce-slow produce-throttle-time-avg)
echo "measured: producer $SLOW (quota $QUOTA_MB MB/s): ${slow:-?} MB/s, produce-throttle-time-avg ${slow_t:-?} ms"
if [ -n "$slow" ] && lt "$slow" "$(awk -v q="$QUOTA_MB" 'BEGIN { print 3 * q }')"; then
  pass "the quota'd producer is held near its quota (${slow} MB/s, quota ${QUOTA_MB} MB/s)"
else fail "the quota'd producer ran at ${slow:-?} MB/s, quota ${QUOTA_MB} MB/s: $(tail -c 400 "$TMP/produce-slow" | tr '\n' '|')"; fi
if [ -n "$slow_t" ] && lt 0 "$slow_t"; then pass "the quota'd producer saw throttle_time_ms (avg ${slow_t} ms)"
else fail "the quota'd producer saw no throttle time: '${slow_t:-}'"; fi

perf produce-fast "$PREFIX-fast"
fast=$(mbps produce-fast); fast_t=$(metric produce-fast produce-throttle-time-avg)
echo "measured: producer $PREFIX-fast (no quota): ${fast:-?} MB/s, produce-throttle-time-avg ${fast_t:-?} ms"
if [ -n "$fast_t" ] && ! lt 0 "$fast_t"; then pass "a producer without a quota is never throttled"
else fail "the unquota'd producer was throttled: '${fast_t:-}'"; fi
if [ -n "$fast" ] && [ -n "$slow" ] && ge "$fast" "$(awk -v s="$slow" 'BEGIN { print 4 * s }')"; then
  pass "the unquota'd producer ran over 4x faster (${fast} vs ${slow} MB/s)"
else fail "the unquota'd producer ran at ${fast:-?} MB/s vs ${slow:-?}"; fi

consume() {  # consume NAME CLIENT_ID: 4,000 of the topic's records (4 MB) from the start
  printf 'client.id=%s\n' "$2" > "$TMP/$1.properties"
  run "$1" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$BOOTSTRAP" --topic "$T" \
    --messages 4000 --timeout 120000 --group "$PREFIX-$1" --print-metrics --consumer.config "$TMP/$1.properties"
}
# consumed_mbps NAME: fetch.MB.sec of the data line (header: start.time, end.time,
# data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms,
# fetch.MB.sec, ...): the rate once the group is joined
consumed_mbps() { awk -F', *' '/^[0-9][0-9][0-9][0-9]-/ { print $9; exit }' "$TMP/$1"; }
consume consume-slow "$READER"
creader=$(consumed_mbps consume-slow); creader_t=$(metric consume-slow fetch-throttle-time-avg)
echo "measured: consumer $READER (quota $QUOTA_MB MB/s): ${creader:-?} MB/s, fetch-throttle-time-avg ${creader_t:-?} ms"
if [ -n "$creader" ] && lt "$creader" "$(awk -v q="$QUOTA_MB" 'BEGIN { print 3 * q }')"; then
  pass "the quota'd consumer is held near its quota (${creader} MB/s)"
else fail "the quota'd consumer read at ${creader:-?} MB/s: $(tail -c 400 "$TMP/consume-slow" | tr '\n' '|')"; fi
if [ -n "$creader_t" ] && lt 0 "$creader_t"; then pass "the quota'd consumer saw throttle_time_ms (avg ${creader_t} ms)"
else fail "the quota'd consumer saw no throttle time: '${creader_t:-}'"; fi
consume consume-fast "$PREFIX-free-reader"
cfree=$(consumed_mbps consume-fast); cfree_t=$(metric consume-fast fetch-throttle-time-avg)
echo "measured: consumer $PREFIX-free-reader (no quota): ${cfree:-?} MB/s, fetch-throttle-time-avg ${cfree_t:-?} ms"
if [ -n "$cfree_t" ] && ! lt 0 "$cfree_t" && [ -n "$cfree" ] && [ -n "$creader" ] && ge "$cfree" "$(awk -v s="$creader" 'BEGIN { print 4 * s }')"; then
  pass "a consumer without a quota is not throttled and reads over 4x faster (${cfree} MB/s)"
else fail "the unquota'd consumer: ${cfree:-?} MB/s, throttle avg '${cfree_t:-}'"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
