#!/usr/bin/env bash
# Peer suite: sarama's functional tests (build tag `functional`, module source from the Go module cache at
# the version compat/go/sarama/go.mod pins). They are listed here, one SKIP line each, not run: their
# TestMain (functional_test.go) either starts a 5-broker docker compose cluster or, with TOXIPROXY_ADDR,
# expects 5 toxiproxy proxies kafka1..kafka5 in front of 5 brokers, and before any test it creates the topics
# test.1/test.4/test.64 with replication factor 3, which a single-node broker (sluice or the reference Kafka)
# rejects; a failing TestMain fails every test. Every test then starts with setupFunctionalTest: toxiproxy
# ResetState and ensureFullyReplicated (__consumer_offsets and the test topics fully replicated, leaders
# elected). compat/go/sarama covers sarama against one broker instead.
set -uo pipefail
: "${SARAMA_DIR:?SARAMA_DIR (module dir of github.com/IBM/sarama) not set}"
echo "CLIENT_VERSION: sarama ${SARAMA_DIR##*@} functional tests"
reason="needs sarama's 5-broker toxiproxy cluster: TestMain creates RF=3 topics, setupFunctionalTest resets toxiproxy and waits for full replication; a single-node broker cannot host it"
n=0
for t in $(grep -ho '^func Test[A-Za-z0-9_]*' "$SARAMA_DIR"/functional_*_test.go | sed 's/^func //' | sort -u); do
  echo "SKIP $t: $reason"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "FAIL listing: no functional tests found in $SARAMA_DIR"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
echo "0 passed, 0 failed, $n skipped"
