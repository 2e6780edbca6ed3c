#!/usr/bin/env bash
# Kafka's share-group CLI (KIP-932, the Kafka jars in $KAFKA_LIBS) against $BOOTSTRAP: FeatureCommand
# finalizes share.version 1 (Kafka 4.1 formats it at 0), ConsoleProducer writes 5 records,
# ConfigCommand sets the group's share.auto.offset.reset=earliest, ConsoleShareConsumer consumes
# them (accepting each), then ShareGroupCommand (kafka-share-groups.sh): --describe --offsets and
# --members, --delete-offsets and a describe after it. The 4.1.2 CLI has no --reset-offsets
# ("not yet implemented"); AlterShareGroupOffsets is covered by the differential and protocol tests.
# KAFKA_BROKER=1: the broker is Kafka 4.1.2 (its describe lags, see below). Every output is
# checked. Prints "N passed, N failed".
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

# run NAME CLASS ARGS...: runs a tool, output (stdout+stderr, stack frames dropped) in $TMP/NAME
run() {
  local name=$1; shift
  timeout 120 java -Xmx256m -Dlog4j2.level=error -cp "$LIBS/*" "$@" > "$TMP/$name.raw" 2>&1 < "${STDIN:-/dev/null}"
  local rc=$?
  grep -v $'^\tat \|^SLF4J' "$TMP/$name.raw" > "$TMP/$name"
  return $rc
}
share() { run "$1" org.apache.kafka.tools.consumer.group.ShareGroupCommand --bootstrap-server "$BOOTSTRAP" "${@:2}"; }
CONFIG_COMMAND=kafka.admin.ConfigCommand
unzip -l "$(ls "$LIBS"/kafka-tools-[0-9]*.jar | head -1)" 2>/dev/null | grep -q ' org/apache/kafka/tools/ConfigCommand.class$' \
  && CONFIG_COMMAND=org.apache.kafka.tools.ConfigCommand
# expect NAME LABEL REGEX: a line of NAME's output matches the extended regex REGEX
expect() {
  if grep -qE -- "$3" "$TMP/$1"; then pass "$2"; else fail "$2: wanted /$3/, got: $(head -c 600 "$TMP/$1" | tr '\n' '|')"; fi
}
# start_offset NAME: the START-OFFSET column of the topic's partition-0 row of a describe
start_offset() { awk -v t="$T" '$2 == t && $3 == 0 { print $4 }' "$TMP/$1"; }
expect_start() {
  local got; got=$(start_offset "$1")
  if [ "$got" = "$3" ]; then pass "$2"; else fail "$2: start offset '$got', wanted '$3': $(head -c 600 "$TMP/$1" | tr '\n' '|')"; fi
}

T=$PREFIX-share
G=$PREFIX-share-g
run feature org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOTSTRAP" upgrade --feature share.version=1
expect feature "share.version finalized at 1" "share.version was upgraded to 1|share.version.*1"
run topic org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create --topic "$T" --partitions 1
expect topic "topic created" "Created topic $T."
printf 'r0\nr1\nr2\nr3\nr4\n' > "$TMP/records"
STDIN=$TMP/records run produce org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$BOOTSTRAP" --topic "$T"
run config "$CONFIG_COMMAND" --bootstrap-server "$BOOTSTRAP" --alter --entity-type groups --entity-name "$G" \
  --add-config share.auto.offset.reset=earliest
expect config "group config share.auto.offset.reset=earliest" "Completed updating config for group $G."
run consume org.apache.kafka.tools.consumer.ConsoleShareConsumer --bootstrap-server "$BOOTSTRAP" --topic "$T" \
  --group "$G" --max-messages 5 --timeout-ms 30000
expect consume "the share consumer gets the 5 records" "Processed a total of 5 messages"

share describe --describe --offsets --group "$G"
# Every record was accepted: the start offset is 5. Kafka 4.1.2 shows 0, the start offset its
# share-partition persisted before the acknowledgement moved it (see README's differential notes).
got=$(start_offset describe)
if [ "$got" = 5 ] || { [ "${KAFKA_BROKER:-0}" = 1 ] && [ "$got" = 0 ]; }; then pass "describe --offsets after consuming: start offset $got"
else fail "describe --offsets after consuming: start offset '$got': $(head -c 600 "$TMP/describe" | tr '\n' '|')"; fi
share members --describe --members --group "$G"
expect members "the share consumer left: no members" "has no active members"

share delete --delete-offsets --group "$G" --topic "$T"
expect delete "delete-offsets reports the topic deleted" "$T +Successful"
share describe5 --describe --offsets --group "$G"
expect_start describe5 "describe after delete-offsets: the partition is gone" ""

share unknown --describe --offsets --group "$PREFIX-no-such-group"
expect unknown "describe of an unknown group" "does not exist|no active members|$PREFIX-no-such-group"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
