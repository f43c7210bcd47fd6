"""How long the engine's threads were ready to run but had no CPU: Linux's run-queue delay, read per step.

A timing on a shared machine includes time the model did not compute at all: its threads were runnable, but
other programs (the browser drawing the page, Streamlit, other users) held the cores. Linux counts that time
per thread in /proc/<pid>/task/<tid>/schedstat (second field, nanoseconds "spent waiting on a runqueue"; see
the kernel's Documentation/scheduler/sched-stats.rst), so the engine can measure its own disturbance and say
it next to TTFT and TPOT. Where the file does not exist (macOS, Windows) the meter says so and measures nothing.

Two sums per interval: `longest` (the thread that waited longest) and `threads` (all threads together). How much
of it the interval's wall time gained is measured, not assumed: about the wait, more often less
(docs/decisions/cpu-wait.md), so "TPOT less the wait" is about the step alone, not a bound either way.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from dataclasses import dataclass

TASKS = "/proc/self/task"  # one folder per thread of this process
NS = 1e-9
DECODE_ALL_THREADS = "decode_cpu_wait_all_threads_s"  # Trace.env key: the decode steps' wait, every thread's added
_NOT_PLAIN = re.compile(r"[^\w .,:;/@()+=%'?&#~-]")  # a note goes into traces and pages: plain characters only


def _plain(exc: Exception) -> str:
    return _NOT_PLAIN.sub(" ", str(exc) or type(exc).__name__)[:160]


def parse_schedstat(text: str) -> int:
    """The run-queue wait in ns from one schedstat line: 'on-CPU ns, waiting ns, timeslices'; ValueError otherwise."""
    fields = text.split()
    if len(fields) < 2 or not fields[1].isdigit():
        raise ValueError(f"a schedstat line has three whole numbers, not {text.strip()[:60]!r}")
    return int(fields[1])


class _OpenFiles:
    """The schedstat files kept open and re-read with pread (an order of magnitude cheaper than opening each file
    every step). Per process (a forked child's inherited files would describe its parent's
    threads) and per thread id; a file that fails (its thread ended) is closed and opened afresh once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pid, self.root = os.getpid(), ""
        self.fds: dict[str, int] = {}

    def _close_all(self) -> None:
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}

    def read(self, path: str) -> bytes:
        fd = self.fds.get(path)
        if fd is not None:
            try:
                data = os.pread(fd, 256, 0)
                if data:
                    return data
            except OSError:
                pass
            with contextlib.suppress(OSError):
                os.close(fd)
            del self.fds[path]
        fd = os.open(path, os.O_RDONLY)
        self.fds[path] = fd
        return os.pread(fd, 256, 0)

    def read_all(self, tasks: str) -> dict[str, int]:
        with self.lock:
            if os.getpid() != self.pid or tasks != self.root:  # a forked child (its parent's threads), another folder
                self._close_all()
                self.pid, self.root = os.getpid(), tasks
            paths = {tid: os.path.join(tasks, tid, "schedstat") for tid in os.listdir(tasks)}
            for path in set(self.fds) - set(paths.values()):  # threads that ended
                with contextlib.suppress(OSError):
                    os.close(self.fds.pop(path))
            waits = {}
            for tid, path in paths.items():
                try:
                    waits[tid] = parse_schedstat(self.read(path).decode())
                except (FileNotFoundError, ProcessLookupError):  # the thread ended between listdir and open
                    continue
            return waits


_OPEN = _OpenFiles()


def read_waits(tasks: str = TASKS) -> dict[str, int]:
    """Thread id -> ns that thread has waited for a CPU since it started (threads that end meanwhile are skipped)."""
    return _OPEN.read_all(tasks)


def missing_reason(tasks: str = TASKS) -> str:
    """'' where this process's per-thread schedstat can be read, else one sentence saying why not."""
    if not os.path.isdir(tasks):
        return ("this system has no per-thread schedstat (Linux's /proc/PID/task/TID/schedstat; macOS and "
                "Windows have none), so the time the engine waited for a CPU was not measured")
    try:
        if not read_waits(tasks):
            raise ValueError("no thread listed")
    except (OSError, ValueError) as exc:
        return f"this Linux does not give per-thread schedstat ({_plain(exc)}), so the CPU wait was not measured"
    return ""


@dataclass
class Wait:
    """The CPU wait of one interval, in seconds."""
    longest: float = 0.0  # the thread that waited longest (about the wall time it added, often more)
    threads: float = 0.0  # all threads together


def wait_between(before: dict[str, int], after: dict[str, int]) -> Wait:
    """The wait that accumulated between two `read_waits` (threads born in between count from zero)."""
    deltas = [max(ns - before.get(tid, 0), 0) for tid, ns in after.items()]
    return Wait(max(deltas, default=0) * NS, sum(deltas) * NS)


class CpuWaitMeter:
    """Marks the start of a timed interval and returns its CPU wait at the end; measures its own reads' cost.

    `mark()` right before the interval's first timestamp, `lap()` right after its last: the reads stay outside
    every timed interval, and `read_seconds` says what they cost in all (`reads` of them).
    """

    def __init__(self, tasks: str | None = None):
        self.tasks = tasks or TASKS  # looked up here, so a test can point the module at a fake /proc
        self.reason = missing_reason(self.tasks)
        self.available = not self.reason
        self.read_seconds = 0.0
        self.reads = 0
        self.last = Wait()  # the latest interval's wait
        self.total = Wait()  # every interval's wait, added up
        self._mark: dict[str, int] = {}

    def _read(self) -> dict[str, int]:
        if not self.available:
            return {}
        start = time.perf_counter()
        try:
            waits = read_waits(self.tasks)
        except (OSError, ValueError) as exc:  # e.g. /proc unmounted mid-run: stop measuring, say why
            self.available, self.reason = False, f"reading schedstat failed part-way ({_plain(exc)}), so the CPU wait was not measured"
            waits = {}
        self.read_seconds += time.perf_counter() - start
        self.reads += 1
        return waits

    def mark(self) -> None:
        self._mark = self._read()

    def snapshot(self) -> dict[str, int]:
        """Every thread's wait so far ({} when not measurable), for intervals that overlap each other (a batch's
        riders each have their own gap between tokens, all ending at the same step): pair two with `since`."""
        return self._read()

    def since(self, before: dict[str, int], after: dict[str, int]) -> Wait:
        """The wait between two snapshots (zero when not measurable); `last` and `total` are left alone."""
        return wait_between(before, after) if self.available else Wait()

    def lap(self) -> Wait:
        """The wait since the last `mark()` (zero when not measurable); also kept in `last` and added to `total`."""
        after = self._read()
        self.last = wait_between(self._mark, after) if self.available else Wait()
        self.total = Wait(self.total.longest + self.last.longest, self.total.threads + self.last.threads)
        return self.last


def summary_line(trace) -> str:
    """One plain line for the CLI: the run's CPU wait per token and in prefill, or why it was not measured."""
    if trace.cpu_wait_seconds is None:
        return f"CPU wait: {trace.cpu_wait_note or 'not measured for this run'}"
    per_token = trace.decode_cpu_wait_seconds / max(len(trace.steps), 1)
    return (f"CPU wait (runnable, no core free: other programs held it): {per_token * 1e3:,.1f} ms per decode step, "
            f"{trace.prefill_cpu_wait_seconds * 1e3:,.1f} ms in prefill; reading schedstat cost "
            f"{trace.cpu_wait_read_seconds * 1e3:,.2f} ms, outside the timings")
