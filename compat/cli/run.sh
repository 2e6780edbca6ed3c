#!/usr/bin/env bash
# Kafka's own admin CLI tools (from the Kafka jars in $KAFKA_LIBS: 4.1.2, or another release with scripts/compat --clients-version) against $BOOTSTRAP:
# TopicCommand (create with configs, describe, alter partitions, list, delete), ConfigCommand
# (describe/alter topic, broker and user quota configs), DeleteRecordsCommand, GetOffsetShell, LogDirsCommand,
# LeaderElectionCommand. Every output is checked. Prints "N passed, N failed".
set -uo pipefail
BOOTSTRAP=${BOOTSTRAP:-127.0.0.1:9092}
PREFIX=${TOPIC_PREFIX:-compat-$(date +%s)}
LIBS=${KAFKA_LIBS:-$(cd "$(dirname "$0")/../.." && pwd)/.tools/kafka/libs}
BROKER_ID=${BROKER_ID:-1}
command -v java >/dev/null || { echo "FAIL java not installed"; echo "0 passed, 1 failed"; exit 1; }
ls "$LIBS"/kafka-tools-*.jar >/dev/null 2>&1 || { echo "FAIL no Kafka jars in $LIBS (scripts/kafka-reference libs)"; echo "0 passed, 1 failed"; exit 1; }
KV=$(basename "$(ls "$LIBS"/kafka-tools-[0-9]*.jar | head -1)" .jar)
echo "CLIENT_VERSION: ${KV/kafka-tools-/kafka CLI }"
echo "bootstrap=$BOOTSTRAP prefix=$PREFIX"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
passed=0; failed=0
pass() { passed=$((passed+1)); echo "PASS $*"; }
fail() { failed=$((failed+1)); echo "FAIL $*"; }

# run NAME CLASS ARGS...: runs a tool, output (stdout+stderr, stack frames dropped) in $TMP/NAME
run() {
  local name=$1; shift
  timeout 120 java -Xmx256m -Dlog4j2.level=error -cp "$LIBS/*" "$@" > "$TMP/$name.raw" 2>&1
  local rc=$?
  grep -v $'^\tat \|^SLF4J' "$TMP/$name.raw" > "$TMP/$name"
  return $rc
}
topics() { run "$1" org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" "${@:2}"; }
# ConfigCommand is kafka.admin.ConfigCommand up to 4.1, org.apache.kafka.tools.ConfigCommand in 4.4
CONFIG_COMMAND=kafka.admin.ConfigCommand
unzip -l "$(ls "$LIBS"/kafka-tools-[0-9]*.jar | head -1)" 2>/dev/null | grep -q ' org/apache/kafka/tools/ConfigCommand.class$' \
  && CONFIG_COMMAND=org.apache.kafka.tools.ConfigCommand
configs() { run "$1" "$CONFIG_COMMAND" --bootstrap-server "$BOOTSTRAP" "${@:2}"; }
# expect NAME LABEL TEXT: the output of NAME contains the line fragment TEXT
expect() {
  if grep -qF -- "$3" "$TMP/$1"; then pass "$2"; else fail "$2: wanted '$3', got: $(head -c 600 "$TMP/$1" | tr '\n' '|')"; fi
}
refuse() {
  if grep -qF -- "$3" "$TMP/$1"; then fail "$2: unexpected '$3' in: $(head -c 600 "$TMP/$1" | tr '\n' '|')"; else pass "$2"; fi
}

T=$PREFIX-cli
# ---------------------------------------------------------------- TopicCommand
topics create --create --topic "$T" --partitions 2 --config retention.ms=3600000 --config cleanup.policy=compact
expect create "create with configs" "Created topic $T."
topics describe --describe --topic "$T"
expect describe "describe: partition count and replication factor" "PartitionCount: 2	ReplicationFactor: 1"
expect describe "describe: topic configs listed" "cleanup.policy=compact"
expect describe "describe: topic configs listed (retention.ms)" "retention.ms=3600000"
expect describe "describe: partition 1 led by the broker" "Partition: 1	Leader: $BROKER_ID	Replicas: $BROKER_ID	Isr: $BROKER_ID"
topics bad --create --topic "$T-bad" --config segment.bytes=1000
expect bad "create with an invalid config is refused with Kafka's message" \
  "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"
topics grow --alter --topic "$T" --partitions 3
topics describe3 --describe --topic "$T"
expect describe3 "alter --partitions 3" "PartitionCount: 3"
topics shrink --alter --topic "$T" --partitions 2
expect shrink "alter to fewer partitions is refused" "The topic $T currently has 3 partition(s); 2 would not be an increase."
topics list --list
expect list "list shows the topic" "$T"

# ---------------------------------------------------------------- ConfigCommand, topics
configs tdesc --describe --entity-type topics --entity-name "$T"
expect tdesc "describe topic configs: header" "Dynamic configs for topic $T are:"
expect tdesc "describe topic configs: override with synonyms" \
  "cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}"
configs talter --alter --entity-type topics --entity-name "$T" --add-config retention.bytes=1048576,max.message.bytes=2000000
expect talter "alter topic configs" "Completed updating config for topic $T."
configs tdel --alter --entity-type topics --entity-name "$T" --delete-config retention.ms
expect tdel "delete a topic config" "Completed updating config for topic $T."
configs tdesc2 --describe --entity-type topics --entity-name "$T"
expect tdesc2 "altered value shown" "retention.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.bytes=1048576, DEFAULT_CONFIG:log.retention.bytes=-1}"
refuse tdesc2 "deleted config gone" "retention.ms="
configs tbad --alter --entity-type topics --entity-name "$T" --add-config retention.ms=-5
expect tbad "invalid topic config refused" "Invalid value -5 for configuration retention.ms: Value must be at least -1"
configs tall --describe --all --entity-type topics --entity-name "$T"
expect tall "describe --all: defaults with broker synonyms" \
  "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"
expect tall "describe --all: segment.ms default without synonyms" "segment.ms=604800000 sensitive=false synonyms={}"

# ---------------------------------------------------------------- ConfigCommand, brokers
K=log.cleaner.min.compaction.lag.ms
configs balter --alter --entity-type brokers --entity-name "$BROKER_ID" --add-config "$K=1"
expect balter "alter a broker config" "Completed updating config for broker $BROKER_ID."
configs bdesc --describe --entity-type brokers --entity-name "$BROKER_ID"
expect bdesc "describe broker: dynamic value with synonyms" \
  "$K=1 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:$K=1, DEFAULT_CONFIG:$K=0}"
configs ball --describe --all --entity-type brokers --entity-name "$BROKER_ID"
expect ball "describe --all broker" "log.retention.check.interval.ms=300000 sensitive=false"
configs bstatic --alter --entity-type brokers --entity-name "$BROKER_ID" --add-config num.partitions=3
expect bstatic "read-only broker config refused" "Cannot update these configs dynamically: Set(num.partitions)"
configs bdef --alter --entity-type brokers --entity-default --add-config "$K=2"
expect bdef "alter cluster-default broker config" "Completed updating default config for brokers in the cluster."
configs bdefdesc --describe --entity-type brokers --entity-default
expect bdefdesc "describe cluster defaults" "$K=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:$K=2}"
configs bclean1 --alter --entity-type brokers --entity-name "$BROKER_ID" --delete-config "$K"
configs bclean2 --alter --entity-type brokers --entity-default --delete-config "$K"
configs bdesc2 --describe --entity-type brokers --entity-name "$BROKER_ID"
refuse bdesc2 "broker config deleted again" "$K="
# User quotas: the describe also asks DescribeUserScramCredentials (no credential: nothing printed).
U=$PREFIX-user
configs ualter --alter --entity-type users --entity-name "$U" --add-config producer_byte_rate=1024,request_percentage=12.5
expect ualter "alter user quota" "Completed updating config for user $U."
configs udesc --describe --entity-type users --entity-name "$U"
expect udesc "describe user quota" "Quota configs for user-principal '$U' are producer_byte_rate=1024.0, request_percentage=12.5"
refuse udesc "describe user quota: no error" "Error"
configs uclean --alter --entity-type users --entity-name "$U" --delete-config producer_byte_rate,request_percentage
configs udesc2 --describe --entity-type users --entity-name "$U"
refuse udesc2 "user quota deleted again" "producer_byte_rate"

# ---------------------------------------------------------------- DeleteRecords, offsets, log dirs
D=$T-records
topics dcreate --create --topic "$D" --partitions 1
run perf org.apache.kafka.tools.ProducerPerformance --topic "$D" --num-records 100 --record-size 100 \
  --throughput -1 --producer-props bootstrap.servers="$BOOTSTRAP" acks=all
expect perf "produce 100 records" "100 records sent"
echo "{\"partitions\":[{\"topic\":\"$D\",\"partition\":0,\"offset\":40}],\"version\":1}" > "$TMP/dr.json"
run dr org.apache.kafka.tools.DeleteRecordsCommand --bootstrap-server "$BOOTSTRAP" --offset-json-file "$TMP/dr.json"
expect dr "DeleteRecordsCommand moves the low watermark" "partition: $D-0	low_watermark: 40"
echo "{\"partitions\":[{\"topic\":\"$D\",\"partition\":0,\"offset\":1000}],\"version\":1}" > "$TMP/dr2.json"
run dr2 org.apache.kafka.tools.DeleteRecordsCommand --bootstrap-server "$BOOTSTRAP" --offset-json-file "$TMP/dr2.json"
expect dr2 "DeleteRecords beyond the high watermark" "OffsetOutOfRangeException"
run earliest org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic "$D" --time -2
expect earliest "earliest offset is the new log start" "$D:0:40"
run latest org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic "$D" --time -1
expect latest "latest offset unchanged" "$D:0:100"
run logdirs org.apache.kafka.tools.LogDirsCommand --bootstrap-server "$BOOTSTRAP" --describe --topic-list "$D"
if python3 - "$TMP/logdirs" "$D" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
doc = json.loads(text[text.index('{"brokers"'):].splitlines()[0])
parts = [p for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"]]
assert [p["partition"] for p in parts] == [sys.argv[2] + "-0"], parts
assert parts[0]["size"] > 10000 and parts[0]["offsetLag"] == 0 and parts[0]["isFuture"] is False, parts
assert all(d["error"] is None and d["logDir"] for b in doc["brokers"] for d in b["logDirs"])
PY
then pass "LogDirsCommand reports the partition and its size"; else fail "LogDirsCommand: $(head -c 600 "$TMP/logdirs")"; fi
run elect org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$BOOTSTRAP" --election-type preferred --topic "$D" --partition 0
expect elect "preferred leader election is not needed" "Valid replica already elected for partitions $D-0"

# ---------------------------------------------------------------- delete
topics del --delete --topic "$T"
gone=0
for _ in 1 2 3 4 5; do
  topics list2 --list
  if ! grep -qx -- "$T" "$TMP/list2"; then gone=1; break; fi
  sleep 1
done
[ $gone = 1 ] && pass "delete removes the topic from --list" || fail "topic $T still listed after --delete"
topics del2 --delete --topic "$T"
expect del2 "deleting it again fails" "Topic '$T' does not exist as expected"
topics ddel --delete --topic "$D"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
