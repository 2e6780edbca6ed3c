#!/usr/bin/env bash
# Peer suite: franz-go's own pkg/kgo integration tests (from the Go module cache) against BOOTSTRAP.
# The test binary is built by scripts/compat setup (go test -c in the module cache dir) as $KGO_TEST_BIN.
# Tests compat/expected.toml expects to fail against $COMPAT_BROKER run in a second invocation with a short
# timeout, so a hang there (e.g. waiting for a group coordinator) cannot eat the budget of the others.
# KGO_TEST_RF (default 1) is the replication factor of the suite's topics; COMPAT_UNIT (default franz-go/kgo)
# names the expected.toml unit (cluster/kgo runs this script with KGO_TEST_RF=3 against a 3-node cluster).
# COMPAT_RUN=REGEX runs only the matching tests. Output: PASS/FAIL/SKIP per top-level test and a summary;
# the raw `go test -v` output goes to $COMPAT_LOG_DIR/<unit>.raw.log.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${KGO_TEST_BIN:?}" "${KGO_PKG_DIR:?}" "${BOOTSTRAP:?}"
RECORDS=${KGO_TEST_RECORDS:-1000}
MAIN_TIMEOUT=${KGO_MAIN_TIMEOUT:-200s}
XFAIL_TIMEOUT=${KGO_XFAIL_TIMEOUT:-60s}
RF=${KGO_TEST_RF:-1}
UNIT=${COMPAT_UNIT:-franz-go/kgo}
RAW=${COMPAT_LOG_DIR:-/tmp}/${UNIT//\//-}.raw.log
echo "CLIENT_VERSION: franz-go ${FRANZ_GO_VERSION:-?} pkg/kgo tests"
echo "bootstrap=$BOOTSTRAP KGO_TEST_RECORDS=$RECORDS KGO_TEST_RF=$RF dir=$KGO_PKG_DIR"

# expected failures for this broker, as one anchored regex (empty when none)
XFAIL=$(python3 "$ROOT/compat/tools/expected.py" xfail-regex --unit "$UNIT" --broker "${COMPAT_BROKER:-sluice}")
RUN=${COMPAT_RUN:-^Test}
# TestShareGroupETL paces its phases by reading counters every 50 ms, made for franz-go's default of
# 500,000 records: at 1000, a broker that answers an acknowledgement in well under a millisecond
# (sluice, one node) lets the first consumer take every record before the test's gate looks, and
# the test fails for seeing no redelivery (2026-12-03: 7 of 8 runs failed at 1000 records, 0 of 16
# at 10,000; Kafka 4.4.0 passed 5 of 5 at 1000). So it runs alone, at ETL_RECORDS.
ETL='^TestShareGroupETL$'
ETL_RECORDS=${KGO_ETL_RECORDS:-10000}

run() {  # $1 = timeout, rest = extra test flags
  local t=$1; shift
  (cd "$KGO_PKG_DIR" && KGO_SEEDS=$BOOTSTRAP KGO_TEST_RF=$RF KGO_TEST_RECORDS=${TEST_RECORDS:-$RECORDS} KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-none} \
    "$KGO_TEST_BIN" -test.v -test.timeout "$t" -test.run "$RUN" "$@" 2>&1)
}
{
  if [ -z "${COMPAT_RUN:-}" ]; then
    run "$MAIN_TIMEOUT" -test.skip "${XFAIL:+$XFAIL|}$ETL"
    if [ -z "$XFAIL" ] || ! [[ TestShareGroupETL =~ $XFAIL ]]; then
      echo "=== $ETL with KGO_TEST_RECORDS=$ETL_RECORDS"
      TEST_RECORDS=$ETL_RECORDS run "$MAIN_TIMEOUT" -test.run "$ETL"
    fi
    if [ -n "$XFAIL" ]; then
      echo "=== expected failures (compat/expected.toml), timeout $XFAIL_TIMEOUT"
      run "$XFAIL_TIMEOUT" -test.run "$XFAIL"
    fi
  else
    run "$MAIN_TIMEOUT"
  fi
} | go tool test2json -t | GOTEST_RAW=$RAW python3 "$ROOT/compat/tools/gotest_results.py"
