"""Reads `go test -json` / `test2json -t` events on stdin, writes one line per top-level test:
`PASS <Test>`, `FAIL <Test>: <first error line>`, `SKIP <Test>: <reason>`, then `N passed, N failed, N skipped`.

The raw output of every test goes to the file named by GOTEST_RAW (if set), so the suite log stays short.
A test still running when the stream ends (global -test.timeout, crash) is reported as FAIL.
Benchmarks, examples and fuzz targets are not run (-run '^Test'). Subtests are folded into their parent."""
import json
import os
import re
import sys

raw = open(os.environ["GOTEST_RAW"], "w") if os.environ.get("GOTEST_RAW") else None
output = {}      # test -> list of output lines
result = {}      # test -> pass|fail|skip
order = []
pkg_fail = []

for line in sys.stdin:
    line = line.rstrip("\n")
    try:
        ev = json.loads(line)
    except ValueError:
        if raw:
            raw.write(line + "\n")
        continue
    test = ev.get("Test")
    act = ev.get("Action")
    out = ev.get("Output")
    if out is not None and raw:
        raw.write(out)
    if not test:
        if out and (out.startswith("panic:") or out.startswith("FAIL") or "test timed out" in out):
            pkg_fail.append(out.strip())
        continue
    top = test.split("/", 1)[0]
    if top not in output:
        output[top] = []
        order.append(top)
    if out is not None:
        output[top].append(out.rstrip("\n"))
    if act in ("pass", "fail", "skip") and "/" not in test:
        result[top] = act

LOC = re.compile(r"^\s+\S+_test\.go:\d+: ")


def reason(test):
    lines = [ln for ln in output.get(test, []) if LOC.match(ln)]
    lines = [LOC.sub("", ln).strip() for ln in lines if "deleting topic" not in ln]
    return lines[0][:200] if lines else ""


n_pass = n_fail = n_skip = 0
for t in order:
    r = result.get(t)
    if r == "pass":
        n_pass += 1
        print(f"PASS {t}")
    elif r == "skip":
        n_skip += 1
        print(f"SKIP {t}: {reason(t) or 'skipped without a message'}")
    elif r == "fail":
        n_fail += 1
        print(f"FAIL {t}: {reason(t) or 'failed (see raw output)'}")
    else:
        n_fail += 1
        why = next((p for p in pkg_fail if "panic" in p or "timed out" in p), "test binary exited while it ran")
        print(f"FAIL {t}: did not finish: {why[:160]}")
for p in pkg_fail[:3]:
    print(f"  [package] {p[:200]}")
print(f"{n_pass} passed, {n_fail} failed, {n_skip} skipped", flush=True)
sys.exit(1 if n_fail else 0)
