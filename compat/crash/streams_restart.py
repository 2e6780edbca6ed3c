"""Kafka Streams exactly_once_v2 across a broker restart (java/streams-eos-restart).

Starts its own broker (crash.Broker: CRASH_BROKER=sluice with SLUICE_BIN, or kafka with KAFKA_REFERENCE),
runs sluice.compat.StreamsCompat exactly_once_v2 with STREAMS_BROKER_RESTART=1 against it and follows its
output: when the word count asks for it ("BROKER_RESTART", while lines are being produced and counted),
the broker is killed with -9 and restarted on the same data dir and port, and the app is told
("restarted" on its stdin). The app's PASS/FAIL lines are passed through; the final line adds this
wrapper's own checks to the app's. Runs with compat/python/.venv; the Java classes come from
compat/java (scripts/compat builds them).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compat_common import Checks, env  # noqa: E402
from crash import Broker, free_port  # noqa: E402

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")
# the clients' connection warnings while the broker is down (several per second per client)
NOISE = re.compile(r"WARN org\.apache\.kafka\.clients\.NetworkClient - .*(could not be established|disconnected)")


def main():
    kind = env("CRASH_BROKER", "sluice")
    ch = Checks()
    base = (env("CRASH_DIR") or tempfile.mkdtemp(prefix="sluice-crash-")) + "-streams"
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    port = free_port()
    broker = Broker(kind, base, port)
    bootstrap = f"127.0.0.1:{port}"
    print(f"broker={kind} bootstrap={bootstrap} dir={base}", flush=True)
    app_passed = app_failed = 0
    app = None
    try:
        if not ch.run(f"streams-eos-restart/start-{kind}", lambda: broker.start()):
            ch.finish()
        # scripts/compat passes the classpath of the client version it runs (--clients-version)
        cp = env("COMPAT_JAVA_CP", "") or os.pathsep.join([os.path.join(ROOT, "compat/java/target/classes"),
                                                           os.path.join(ROOT, "compat/java/libs/*")])
        app = subprocess.Popen(
            ["java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
             "sluice.compat.StreamsCompat", "exactly_once_v2"],
            env={**os.environ, "BOOTSTRAP": bootstrap, "STREAMS_BROKER_RESTART": "1",
                 "STREAMS_RUNNING_TIMEOUT_MS": env("STREAMS_RUNNING_TIMEOUT_MS", "30000")},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        # the harness's timeout ends a hung app: a watchdog kills it first so the summary still prints
        watchdog = threading.Timer(float(env("STREAMS_RESTART_TIMEOUT_S", "240")), app.kill)
        watchdog.start()
        for line in app.stdout:
            line = line.rstrip("\n")
            m = SUMMARY.match(line)
            if m:
                app_passed, app_failed = int(m.group(1)), int(m.group(2))
                continue
            if NOISE.search(line):
                continue
            print(line, flush=True)
            if line == "BROKER_RESTART":
                t0 = time.time()

                def restart():
                    broker.kill9()
                    broker.start()
                    return f"ok kill -9 and restart of {kind} took {time.time() - t0:.1f}s"
                ok = ch.run("streams-eos-restart/broker-killed-and-restarted", restart)
                app.stdin.write("restarted\n" if ok else "failed\n")
                app.stdin.flush()
        app.wait(30)
        watchdog.cancel()
        if app_passed + app_failed == 0:
            ch.check("streams-eos-restart/app-summary", False, f"StreamsCompat exited {app.returncode} without a summary line")
    finally:
        if app is not None and app.poll() is None:
            app.kill()
        broker.stop()
    ch.passed += app_passed
    ch.failed += app_failed
    ch.finish()


if __name__ == "__main__":
    main()
