"""Per-test results of the compat suites against compat/expected.toml.

  expected.py xfail-regex --unit UNIT --broker B     anchored regex of the tests expected to fail (or empty)
  expected.py verdict --broker B [--filtered]        read compat/report.json + compat/logs/<unit>.log, add
             [--clients V] [--report P] [--logs D]   per-test results to report.json / report.md, print the
                                                     summary, exit 1 on any unexpected failure (P: the report
                                                     path without .json/.md, D: the logs folder, V: the Java
                                                     client version of the run, default 4.1.2)

An entry with `clients = ["4.4.0", ...]` applies only to runs with those client versions.

Every suite log carries `PASS <test>`, `FAIL <test>: <detail>` and `SKIP <test>: <reason>` lines. A test
matches an entry of compat/expected.toml when its text equals the key or starts with the key followed by
" ", "(" or ":". Anything not listed is expected to pass. Verdicts:
  ok               passed as expected (or failed/skipped as expected: "expected fail", "skipped")
  UNEXPECTED FAIL  expected to pass, failed (also: the suite timed out / crashed / printed no summary, or
                   an expected-pass test listed in expected.toml is missing from a full run): fails the run
  newly passing    expected to fail or be skipped, passed: tighten compat/expected.toml (run still passes)
  unexpected skip  skipped although expected to pass or fail: listed with the test's own reason
"""
import argparse
import json
import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED = os.path.join(ROOT, "compat", "expected.toml")
LINE = re.compile(r"^(PASS|FAIL|SKIP) (.*)$")


def load():
    with open(EXPECTED, "rb") as f:
        return tomllib.load(f)


def entries(cfg, unit, broker, clients="4.1.2"):
    """[(key, outcome, reason)] for a unit, broker and client version."""
    issues = {str(k): v for k, v in cfg.get("issues", {}).items()}
    out = []
    for key, e in cfg.get("units", {}).get(unit, {}).items():
        outcome = e["expect"]
        brokers = e.get("brokers", ["sluice"] if outcome == "fail" else ["sluice", "kafka"])
        if broker not in brokers or clients not in e.get("clients", [clients]):
            continue
        reason = e.get("reason", "")
        if "issue" in e:
            subject = issues.get(str(e["issue"]), "?")
            reason = f"issue {e['issue']} \"{subject}\"" + (f": {reason}" if reason else "")
        out.append((key, outcome, reason))
    return out


def match(key, text):
    return text == key or (text.startswith(key) and text[len(key)] in " (:")


def expectation(ents, text):
    for key, outcome, reason in ents:
        if key != "*" and match(key, text):
            return key, outcome, reason
    for key, outcome, reason in ents:
        if key == "*":
            return key, outcome, reason
    return None, "pass", ""


def parse_log(path):
    tests = []
    if not os.path.exists(path):
        return tests
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m:
                tests.append((m.group(1).lower(), m.group(2)))
    return tests


def name_of(result, text):
    """Go peer suites print bare test names. Our own suites print `PASS name (detail)` / `FAIL name: detail`;
    a PASS detail starting with "ok" is cut off, other PASS details stay (expected.toml keys match prefixes)."""
    if result == "pass":
        i = text.rfind(" (ok ")
        return text[:i] if i > 0 and text.endswith(")") else text
    return text.split(": ", 1)[0]


def cmd_xfail(args):
    ents = entries(load(), args.unit, args.broker, args.clients)
    names = [re.escape(k) for k, o, _ in ents if o == "fail" and k != "*"]
    print(f"^({'|'.join(names)})$" if names else "")


def cmd_verdict(args):
    cfg = load()
    rbase = os.path.join(ROOT, args.report)
    rpath = rbase + ".json"
    with open(rpath) as f:
        report = json.load(f)
    logs = os.path.join(ROOT, args.logs)
    counts = {"ok": 0, "expected fail": 0, "skipped": 0, "UNEXPECTED FAIL": 0, "newly passing": 0,
              "unexpected skip": 0}
    detail = {}
    problems = []
    for unit, s in report["suites"].items():
        ents = entries(cfg, unit, args.broker, args.clients)
        rows = []
        seen_keys = set()
        for result, text in parse_log(os.path.join(logs, unit.replace("/", "-") + ".log")):
            name = name_of(result, text)
            key, outcome, reason = expectation(ents, name)
            if key:
                seen_keys.add(key)
            if result == "pass":
                verdict = "ok" if outcome == "pass" else "newly passing"
            elif result == "fail":
                verdict = {"pass": "UNEXPECTED FAIL", "fail": "expected fail"}.get(outcome, "UNEXPECTED FAIL")
            else:
                verdict = "skipped" if outcome == "skip" else "unexpected skip"
            own = text.split(": ", 1)[1] if result != "pass" and ": " in text else ""
            rows.append({"test": name, "result": result, "expected": outcome, "verdict": verdict,
                         "reason": reason or own, "detail": own[:300]})
        nfail_lines = sum(1 for r in rows if r["result"] == "fail")
        if s.get("failed", 0) > nfail_lines:  # timeout, crash, broker start failure, no summary line
            key, outcome, reason = expectation(ents, "*") if any(k == "*" for k, _, _ in ents) else (None, "pass", "")
            note = s.get("note") or f"suite reported {s['failed']} failed, {nfail_lines} FAIL line(s)"
            rows.append({"test": "(suite)", "result": "fail", "expected": outcome, "reason": reason or note,
                         "verdict": "expected fail" if outcome == "fail" else "UNEXPECTED FAIL", "detail": note})
        if not args.filtered and not s.get("note", "").startswith("skipped"):
            for key, outcome, reason in ents:
                if key == "*" or key in seen_keys:
                    continue
                rows.append({"test": key, "result": "missing", "expected": outcome, "reason": reason,
                             "verdict": "UNEXPECTED FAIL" if outcome == "pass" else "not run",
                             "detail": "listed in compat/expected.toml but not in the suite output"})
        for r in rows:
            if r["verdict"] in counts:
                counts[r["verdict"]] += 1
            if r["verdict"] in ("UNEXPECTED FAIL", "newly passing", "unexpected skip"):
                problems.append((unit, r))
        s["tests"] = rows
        s["unexpected_failures"] = sum(1 for r in rows if r["verdict"] == "UNEXPECTED FAIL")
        detail[unit] = rows
    report["expected_file"] = "compat/expected.toml"
    report["verdicts"] = counts
    report["ok"] = counts["UNEXPECTED FAIL"] == 0
    with open(rpath, "w") as f:
        json.dump(report, f, indent=1)

    md = ["", "## Per-test results against compat/expected.toml", "",
          "| verdict | count |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in counts.items()]
    if problems:
        md += ["", "### Needs attention", "", "| suite | test | verdict | detail / reason |", "|---|---|---|---|"]
        for unit, r in problems:
            why = r["detail"] or r["reason"]
            hint = " (tighten compat/expected.toml)" if r["verdict"] == "newly passing" else ""
            md.append(f"| {unit} | {r['test']} | {r['verdict']}{hint} | {esc(why)} |")
    for unit, rows in detail.items():
        xf = [r for r in rows if r["verdict"] in ("expected fail", "not run")]
        sk = [r for r in rows if r["verdict"] == "skipped"]
        if not rows or (not xf and not sk and len(rows) <= 6):
            continue
        md += ["", f"### {unit}: {sum(r['result'] == 'pass' for r in rows)} passed, "
                   f"{sum(r['result'] == 'fail' for r in rows)} failed ({len(xf)} expected), "
                   f"{sum(r['result'] == 'skip' for r in rows)} skipped", ""]
        if xf or sk:
            md += ["| test | result | verdict | reason |", "|---|---|---|---|"]
            md += [f"| {r['test']} | {r['result']} | {r['verdict']} | {esc(r['reason'])} |" for r in xf + sk]
        if len(rows) > 6:
            passed = [r["test"] for r in rows if r["verdict"] == "ok"]
            md += ["", f"<details><summary>{len(passed)} passing</summary>", "", ", ".join(passed), "",
                   "</details>"]
    with open(rbase + ".md", "a") as f:
        f.write("\n".join(md) + "\n")

    print()
    print("per-test verdicts (compat/expected.toml): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for unit, r in problems:
        print(f"  {r['verdict']}: {unit} :: {r['test']}: {(r['detail'] or r['reason'])[:160]}")
    if any(r["verdict"] == "newly passing" for _, r in problems):
        print("  newly passing: tighten compat/expected.toml")
    return 0 if report["ok"] else 1


def esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")[:300]


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("xfail-regex")
    a.add_argument("--unit", required=True)
    a.add_argument("--broker", required=True)
    a.add_argument("--clients", default="4.1.2")
    b = sub.add_parser("verdict")
    b.add_argument("--broker", required=True)
    b.add_argument("--filtered", action="store_true")
    b.add_argument("--clients", default="4.1.2")
    b.add_argument("--report", default="compat/report")
    b.add_argument("--logs", default="compat/logs")
    args = ap.parse_args()
    sys.exit(cmd_xfail(args) if args.cmd == "xfail-regex" else cmd_verdict(args))


if __name__ == "__main__":
    main()
