#!/usr/bin/env bash
# kcat (Debian package, librdkafka from Debian) against $BOOTSTRAP: produce keyed lines, read them back.
# Topics are auto-created by Metadata (kcat has no CreateTopics). Prints "N passed, N failed".
set -uo pipefail
BOOTSTRAP=${BOOTSTRAP:-127.0.0.1:9092}
PREFIX=${TOPIC_PREFIX:-compat-$(date +%s)}
N=${KCAT_RECORDS:-2000}
command -v kcat >/dev/null || { echo "FAIL kcat not installed (apt-get install kcat)"; echo "0 passed, 1 failed"; exit 1; }
KV=$(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\) .*librdkafka \([^ ]*\) .*/kcat \1 (librdkafka \2)/p' | head -1)
echo "CLIENT_VERSION: ${KV:-kcat unknown}"
echo "bootstrap=$BOOTSTRAP prefix=$PREFIX records=$N"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
passed=0; failed=0
pass() { passed=$((passed+1)); echo "PASS $*"; }
fail() { failed=$((failed+1)); echo "FAIL $*"; }

awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) { pad = ""; for (j = 0; j < i % 40; j++) pad = pad "q"; printf "key-%d:value-%06d-%s\n", i % 97, i, pad } }' > "$TMP/in.txt"

roundtrip() {  # $1 = label, $2 = topic, rest = extra producer -X options
  local label=$1 topic=$2; shift 2
  if timeout 120 kcat -b "$BOOTSTRAP" -t "$topic" -P -K: -X message.timeout.ms=60000 "$@" < "$TMP/in.txt" 2> "$TMP/p.err"; then
    pass "$label: kcat -P -K: $N keyed lines (exit 0)"
  else
    fail "$label: kcat -P exit $?: $(tail -3 "$TMP/p.err")"; return
  fi
  if timeout 120 kcat -b "$BOOTSTRAP" -t "$topic" -C -o beginning -e -q -K: > "$TMP/out.txt" 2> "$TMP/c.err"; then
    if cmp -s "$TMP/in.txt" "$TMP/out.txt"; then
      pass "$label: kcat -C -o beginning -e -K: output equals the input ($(wc -l < "$TMP/out.txt") lines)"
    else
      fail "$label: consumed content differs: $(wc -l < "$TMP/out.txt") lines read, first diff: $(diff "$TMP/in.txt" "$TMP/out.txt" | head -3 | tr '\n' ' ')"
    fi
  else
    fail "$label: kcat -C exit $?: $(tail -3 "$TMP/c.err")"
  fi
  # offsets per partition contiguous from 0
  if timeout 120 kcat -b "$BOOTSTRAP" -t "$topic" -C -o beginning -e -q -f '%p %o\n' > "$TMP/offs.txt" 2>> "$TMP/c.err" \
     && awk -v n="$N" '{ if ($2 != next_[$1]+0) { print "partition " $1 " offset " $2 " want " next_[$1]+0; bad=1; exit } next_[$1]=$2+1; c++ }
                       END { if (!bad && c != n) { print "count " c " want " n; bad=1 } exit bad }' "$TMP/offs.txt" > "$TMP/awk.out"; then
    pass "$label: offsets contiguous from 0 (kcat -f '%p %o')"
  else
    fail "$label: offsets: $(cat "$TMP/awk.out")"
  fi
}

roundtrip "acks=all (kcat default)" "$PREFIX-kcat-plain"
roundtrip "idempotent" "$PREFIX-kcat-idem" -X enable.idempotence=true
roundtrip "acks=1 lz4" "$PREFIX-kcat-acks1" -X acks=1 -X compression.codec=lz4

if timeout 60 kcat -b "$BOOTSTRAP" -L -t "$PREFIX-kcat-plain" > "$TMP/meta.txt" 2>&1 && grep -q "topic \"$PREFIX-kcat-plain\" with 1 partitions" "$TMP/meta.txt"; then
  pass "kcat -L lists the auto-created topic with 1 partition"
else
  fail "kcat -L: $(head -5 "$TMP/meta.txt" | tr '\n' ' ')"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
