#!/usr/bin/env bash
# Kafka's TopicCommand and LeaderElectionCommand (from the Kafka jars in $KAFKA_LIBS) against a
# 3-broker cluster ($BOOTSTRAP lists every broker): a topic with replication factor 3 and 12
# partitions created through one broker is described identically by every broker, its replicas
# are three distinct brokers per partition, its leaders are spread 4/4/4 and each is the first
# (preferred) replica; a replication factor above the broker count is refused with Kafka's
# message; a preferred election finds nothing to do; an RF 1 topic's configs are altered and described
# through every broker, also the two without its replica. Prints "N passed, N failed".
set -uo pipefail
BOOTSTRAP=${BOOTSTRAP:?BOOTSTRAP lists the cluster\'s brokers}
PREFIX=${TOPIC_PREFIX:-compat-$(date +%s)}
LIBS=${KAFKA_LIBS:-$(cd "$(dirname "$0")/../.." && pwd)/.tools/kafka/libs}
ls "$LIBS"/kafka-tools-*.jar >/dev/null 2>&1 || { echo "FAIL no Kafka jars in $LIBS"; echo "0 passed, 1 failed"; exit 1; }
KV=$(basename "$(ls "$LIBS"/kafka-tools-[0-9]*.jar | head -1)" .jar)
echo "CLIENT_VERSION: ${KV/kafka-tools-/kafka CLI }"
IFS=, read -r -a BROKERS <<< "$BOOTSTRAP"
[ "${#BROKERS[@]}" -ge 3 ] || { echo "FAIL BOOTSTRAP must list 3 brokers: $BOOTSTRAP"; echo "0 passed, 1 failed"; exit 1; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
passed=0; failed=0
pass() { passed=$((passed+1)); echo "PASS $*"; }
fail() { failed=$((failed+1)); echo "FAIL $*"; }
run() {  # run NAME CLASS ARGS...: output in $TMP/NAME
  local name=$1; shift
  timeout 120 java -Xmx256m -Dlog4j2.level=error -cp "$LIBS/*" "$@" > "$TMP/$name.raw" 2>&1
  grep -v $'^\tat \|^SLF4J' "$TMP/$name.raw" > "$TMP/$name"
}
expect() { if grep -qF -- "$3" "$TMP/$1"; then pass "$2"; else fail "$2: wanted '$3', got: $(head -c 600 "$TMP/$1" | tr '\n' '|')"; fi; }

T=$PREFIX-rf3
run create org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS[1]}" --create --topic "$T" --partitions 12 --replication-factor 3
expect create "create RF 3 x 12 through broker 2" "Created topic $T."

# The partition lines of a describe, normalised: "P leader replicas isr" sorted by partition.
partitions() {
  sed -nE 's/.*Partition: ([0-9]+)[[:space:]]+Leader: (-?[0-9]+)[[:space:]]+Replicas: ([0-9,]+)[[:space:]]+Isr: ([0-9,]*).*/\1 \2 \3 \4/p' "$TMP/$1" | sort -n
}
for i in 0 1 2; do
  for _ in $(seq 1 50); do  # the broker's image follows the controller's log
    run "describe$i" org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS[$i]}" --describe --topic "$T"
    [ "$(partitions "describe$i" | wc -l)" = 12 ] && break
    sleep 0.2
  done
  partitions "describe$i" > "$TMP/parts$i"
done
if [ "$(wc -l < "$TMP/parts0")" = 12 ]; then pass "describe lists 12 partitions"; else fail "describe lists $(wc -l < "$TMP/parts0") partitions: $(tr '\n' '|' < "$TMP/describe0")"; fi
expect describe0 "describe: replication factor 3" "ReplicationFactor: 3"
if cmp -s "$TMP/parts0" "$TMP/parts1" && cmp -s "$TMP/parts0" "$TMP/parts2"; then
  pass "every broker describes the same leaders, replicas and ISR"
else
  fail "brokers disagree: $(paste -d'|' "$TMP/parts0" "$TMP/parts1" "$TMP/parts2" | tr '\n' ' ')"
fi
spread=$(awk '{print $2}' "$TMP/parts0" | sort | uniq -c | awk '{print $1}' | sort -n | tr '\n' ' ')
if [ "$spread" = "4 4 4 " ]; then pass "leaders spread 4/4/4"; else fail "leaders spread: $spread($(awk '{print $2}' "$TMP/parts0" | tr '\n' ' '))"; fi
bad=$(awk '{n=split($3, r, ","); split("", seen); d=0; for (i=1;i<=n;i++) if (!(r[i] in seen)) {seen[r[i]]=1; d++}
           if (n != 3 || d != 3 || $2 != r[1]) print $1}' "$TMP/parts0" | tr '\n' ' ')
if [ -z "$bad" ] && [ -s "$TMP/parts0" ]; then pass "three distinct replicas per partition, the first one leads"; else fail "partitions with bad replicas/leader: $bad"; fi

run rf4 org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS[0]}" --create --topic "$T-rf4" --partitions 1 --replication-factor 4
expect rf4 "RF 4 on 3 brokers refused with Kafka's message" "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 broker(s) are registered."

run elect org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "${BROKERS[2]}" --election-type PREFERRED --topic "$T" --partition 0
expect elect "preferred election when the preferred replica leads: nothing to do" "Valid replica already elected for partitions"

# A topic's configs through every broker, also those without a replica of it (RF 1, one partition):
# Kafka answers from its metadata, wherever the partition is.
T1=$PREFIX-rf1
run create1 org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS[0]}" --create --topic "$T1" --partitions 1 --replication-factor 1
expect create1 "create RF 1 x 1 through broker 1" "Created topic $T1."
printf 'default.api.timeout.ms=15000\nrequest.timeout.ms=5000\n' > "$TMP/admin.properties"
for i in 0 1 2; do
  for _ in $(seq 1 50); do  # until this broker's image has the topic
    run "seen$i" org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS[$i]}" --describe --topic "$T1"
    grep -q "Partition: 0" "$TMP/seen$i" && break
    sleep 0.2
  done
  ms=$((86400000 + i))
  run "alter$i" kafka.admin.ConfigCommand --bootstrap-server "${BROKERS[$i]}" --command-config "$TMP/admin.properties" \
    --entity-type topics --entity-name "$T1" --alter --add-config "retention.ms=$ms"
  expect "alter$i" "alter the RF 1 topic's config through broker $((i + 1))" "Completed updating config for topic $T1."
  run "configs$i" kafka.admin.ConfigCommand --bootstrap-server "${BROKERS[$i]}" --command-config "$TMP/admin.properties" \
    --entity-type topics --entity-name "$T1" --describe
  expect "configs$i" "describe the RF 1 topic's configs through broker $((i + 1))" "retention.ms=$ms"
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
