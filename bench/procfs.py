"""What the driver reads from /proc around a workload: the broker's RSS, CPU and run-queue wait, its
descriptors and mappings, the client JVM's CPU per thread role sampled over the run (CpuSampler), and the
client's CPU figures over its measured phase (client_cpu_figures). Starts no process."""
import os
import threading
import time

from common import BROKER_CPU, CLIENT_CPU


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0  # MiB
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()
    # fields[0] is state (field 3); utime is field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_wait(pid):
    """(seconds, timeslices): the time the live threads of pid spent runnable but waiting for a CPU, and how
    many times they were scheduled in, summed from /proc/PID/task/*/schedstat (the scheduler's own
    accounting: run time ns, run-queue wait ns, timeslices). On a core shared with other processes the
    wait, not the CPU time, is what lengthens each request's round trip."""
    wait_ns, slices = 0, 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                _, w, n = f.read().split()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile, or no schedstats in this kernel
        wait_ns += int(w)
        slices += int(n)
    return wait_ns / 1e9, slices


def open_fds(pid):
    """Open file descriptors of the process (entries of /proc/PID/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_limit(pid):
    """The process's soft RLIMIT_NOFILE (from /proc/PID/limits), None if unreadable."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    return int(line.split()[3])
    except (OSError, ValueError, IndexError):
        pass
    return None


def mappings(pid):
    """Memory mappings of the process (lines of /proc/PID/maps): Kafka mmaps its index files."""
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def settle_writeback():
    """Writes back every dirty page (sync) before a workload, so each starts from the same page-cache
    state whatever the one before it wrote: otherwise a produce run that follows gigabytes of
    unwritten data meets the kernel's dirty-page throttling (its writes wait for writeback) and its
    figure depends on the workload order, not on the broker. Returns (Dirty MiB before, seconds the
    sync took); neither is part of any measured phase."""
    dirty = meminfo_mb("Dirty")
    t0 = time.monotonic()
    os.sync()
    return dirty, time.monotonic() - t0


def meminfo_mb(key):
    """A /proc/meminfo figure in MiB (None if absent)."""
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) / 1024
    return None


def reset_hwm(pid):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


class Sampler:
    """Samples VmRSS every interval while a workload runs."""

    def __init__(self, pid, interval=0.2):
        self.pid, self.interval = pid, interval
        self.samples = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append(proc_status(self.pid)["VmRSS"])
            except (OSError, KeyError):
                pass
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_kind(comm):
    """Groups a JVM thread by its name (/proc/PID/task/TID/comm, 15 characters at most)."""
    if comm in ("main", "java"):  # the Java main thread (HotSpot leaves its name as the launcher's)
        return "app"
    if comm.startswith("share-"):  # bench/java/ShareBench's poll loops, one per share consumer
        return "app"
    if comm.startswith(("kafka-producer", "kafka-consumer", "consumer_backgr")):
        return "network"
    if comm.startswith(("GC Thread", "G1 ", "VM Thread")):
        return "gc"
    if comm.startswith(("C1 Compiler", "C2 Compiler")):
        return "jit"
    return "other"


THREAD_KINDS = ("app", "network", "gc", "jit", "other")


def jvm_threads_cpu(pid):
    """{tid: (kind, CPU seconds, times scheduled in)} over the live threads of pid (the last from
    /proc/PID/task/TID/schedstat: every wake-up of a thread that slept, or a preemption, is one)."""
    per_tid = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                data = f.read()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                slices = int(f.read().split()[2])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between listdir and open, or no schedstats in this kernel
        comm = data[data.index("(") + 1:data.rindex(")")]
        fields = data[data.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X"):
            continue  # exited: keep the last live reading
        per_tid[tid] = (thread_kind(comm), (int(fields[11]) + int(fields[12])) / CLK_TCK, slices)
    return per_tid


def syscalls(pid):
    """Read-like plus write-like system calls of the whole process so far (/proc/PID/io syscr + syscw:
    read, recvmsg, readv, write, sendmsg, writev, ... of every thread, ended ones included)."""
    n = 0
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("syscr", "syscw"):
                n += int(v)
    return n


def cores_busy_seconds():
    """{cpu number as str: busy (not idle, not iowait) seconds since boot}, from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                v = [int(x) for x in vals]
                out[name[3:]] = (sum(v[:8]) - v[3] - v[4]) / CLK_TCK
    return out


class CpuSampler:
    """Samples, every interval while a client JVM runs: its CPU per thread kind (threads that end keep
    their last value), the busy time of the client core and of the broker core, and the broker's CPU.
    `window(seconds)` then gives the figures over the last `seconds` of the client's life."""

    def __init__(self, pid, broker_pid=None, interval=0.1):
        self.pid, self.broker_pid, self.interval = pid, broker_pid, interval
        # (t, {kind: s}, client core busy s, broker core busy s, broker cpu s, client times scheduled in,
        #  client read/write syscalls)
        self.samples = []
        self._tids = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        try:
            self._tids.update(jvm_threads_cpu(self.pid))
            calls = syscalls(self.pid)
        except OSError:
            return  # exited
        kinds = dict.fromkeys(THREAD_KINDS, 0.0)
        for kind, secs, _ in self._tids.values():
            kinds[kind] += secs
        slices = sum(n for _, _, n in self._tids.values())
        broker = None
        if self.broker_pid:
            try:
                broker = cpu_seconds(self.broker_pid)
            except OSError:
                pass
        cores = cores_busy_seconds()
        self.samples.append((time.monotonic(), kinds, cores.get(CLIENT_CPU, 0.0), cores.get(BROKER_CPU, 0.0), broker,
                             slices, calls))

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def start(self):
        self._t.start()

    def stop(self):
        self._stop.set()
        self._t.join()

    def _at(self, t, get):
        """A cumulative counter at time t, interpolated linearly between samples."""
        s = self.samples
        if t <= s[0][0]:
            return get(s[0])
        for a, b in zip(s, s[1:]):
            if a[0] <= t <= b[0]:
                f = (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0.0
                return get(a) + f * (get(b) - get(a))
        return get(s[-1])

    def window(self, seconds, end):
        """CPU figures over [end - seconds, end]: the client's measured phase (`end`: when the client
        printed its result line, right after its clock stopped)."""
        if len(self.samples) < 3 or seconds <= 0:
            return {}
        t1 = min(end, self.samples[-1][0])
        t0 = max(self.samples[0][0], t1 - seconds)
        span = t1 - t0
        if span <= 0:
            return {}
        d = lambda get: self._at(t1, get) - self._at(t0, get)  # noqa: E731
        out = {"window_s": span}
        out["client_cpu_s"] = sum(d(lambda x, k=k: x[1][k]) for k in THREAD_KINDS)
        for k in THREAD_KINDS:
            out[f"client_{k}_cpu_s"] = d(lambda x, k=k: x[1][k])
        out["client_core_busy_pct"] = 100.0 * d(lambda x: x[2]) / span
        out["broker_core_busy_pct"] = 100.0 * d(lambda x: x[3]) / span
        if all(x[4] is not None for x in self.samples):
            out["broker_window_cpu_s"] = d(lambda x: x[4])
        out["client_slices"] = d(lambda x: x[5])
        out["client_syscalls"] = d(lambda x: x[6])
        return out


def client_cpu_figures(clients, records, seconds, nbytes, marker, end=None):
    """Client-side CPU of the last client run over its measured phase (the `seconds` before it printed the
    last stdout line matching `marker`, or before `end`), per record; plus the JVM's whole-life CPU
    (start-up, JIT warm-up and close included)."""
    if end is None:
        ends = [t for t, line in clients.lines if marker.search(line)]
        end = ends[-1] if ends else None  # the last: ProducerPerformance prints progress lines of the same shape
    w = clients.cpu.window(seconds, end) if clients.cpu and end is not None else {}
    out = {"client_cpu_total_s": clients.cpu_total_s}
    if end is not None and clients.cpu and clients.cpu.samples:
        out["client_exit_after_result_s"] = clients.cpu.samples[-1][0] - end
    if not w or not records:
        return out
    out["client_window_s"] = w["window_s"]
    out["client_cpu_s"] = w["client_cpu_s"]
    out["client_jvm_pct_of_core"] = 100.0 * w["client_cpu_s"] / w["window_s"]
    out["client_core_busy_pct"] = w["client_core_busy_pct"]
    # records handled in the window: the window is the measured phase, at the measured rate
    rec = records * min(1.0, w["window_s"] / seconds)
    out["client_cpu_us_per_record"] = 1e6 * w["client_cpu_s"] / rec
    for k in THREAD_KINDS:
        out[f"client_{k}_cpu_us_per_record"] = 1e6 * w[f"client_{k}_cpu_s"] / rec
    # per 1,000 records: on this VM every wake-up and system call is costly, and a broker that answers
    # sooner can make a client wake more often for the same records
    out["client_wakeups_per_1k_records"] = 1e3 * w["client_slices"] / rec
    out["client_syscalls_per_1k_records"] = 1e3 * w["client_syscalls"] / rec
    out["broker_core_busy_pct"] = w["broker_core_busy_pct"]
    if "broker_window_cpu_s" in w:
        out["broker_pct_of_core"] = 100.0 * w["broker_window_cpu_s"] / w["window_s"]
    return out
