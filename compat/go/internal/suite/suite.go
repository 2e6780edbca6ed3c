// Package suite is what the franz-go compat units (go, go/groups, go/txn) share: the environment
// they read (BOOTSTRAP, TOPIC_PREFIX), the CLIENT_VERSION line, PASS/FAIL per check and the final
// "N passed, N failed" line that scripts/compat reads.
//
// The counters are package state: a unit is one process running its checks one after another.
package suite

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

var passed, failed int

// Check prints PASS or FAIL for one check (with detail in parentheses when given), counts it and
// returns whether it passed.
func Check(name string, err error, detail string) bool {
	if err != nil {
		failed++
		fmt.Printf("FAIL %s: %v\n", name, err)
		return false
	}
	passed++
	if detail != "" {
		fmt.Printf("PASS %s (%s)\n", name, detail)
	} else {
		fmt.Printf("PASS %s\n", name)
	}
	return true
}

// Env returns the environment variable k, or def when it is unset or empty.
func Env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Seeds splits a BOOTSTRAP list ("host:port,host:port", a cluster's brokers) into seed brokers.
func Seeds(bootstrap string) []string {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// Start reads the broker address (BOOTSTRAP, default 127.0.0.1:9092) and the topic prefix
// (TOPIC_PREFIX, default compat-<unix seconds>) and prints the CLIENT_VERSION line.
func Start() (bootstrap, prefix string) {
	bootstrap = Env("BOOTSTRAP", "127.0.0.1:9092")
	prefix = Env("TOPIC_PREFIX", fmt.Sprintf("compat-%d", time.Now().Unix()))
	fmt.Printf("CLIENT_VERSION: franz-go %s\n", clientVersion())
	return bootstrap, prefix
}

// Finish prints the "N passed, N failed" line and exits 1 when a check failed. Units defer it.
func Finish() {
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// clientVersion is the franz-go version this binary was built with.
func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return d.Version
			}
		}
	}
	return "unknown"
}
