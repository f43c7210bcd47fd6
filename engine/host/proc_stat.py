"""The machine's idle CPU time (Linux /proc/stat), and waiting for the cores to go quiet before a timed run.

Standard library only: the dashboard's Streamlit process reads it without importing torch.
"""
from __future__ import annotations

import os
import time

BUSY_CORES = 0.5  # a window in which other programs used less than this many cores counts as quiet
WINDOW_S = 0.1  # the look at the machine: idle time over this long


def read_idle_seconds(path: str = "/proc/stat") -> float | None:
    """CPU-seconds the machine's cores have been idle since boot (idle + iowait), None where not readable."""
    try:
        with open(path) as f:
            fields = f.readline().split()
        return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def core_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def wait_for_quiet(first_s: float, most_s: float, busy_cores: float = BUSY_CORES, window_s: float = WINDOW_S,
                   idle_seconds=read_idle_seconds, clock=time.perf_counter, sleep=time.sleep,
                   cores: int | None = None) -> tuple[float, bool | None]:
    """Sleep `first_s`, then on until a `window_s` in which the cores were busy for less than `busy_cores` (every program
    counted: whoever calls this is waiting too), `most_s` in all. (seconds waited, quiet at the end: True, False when
    `most_s` ran out first, None where /proc/stat cannot be read and only `first_s` was waited)."""
    start = clock()
    sleep(first_s)
    cores = cores or core_count()
    while True:
        before, t0 = idle_seconds(), clock()
        if before is None:
            return clock() - start, None
        sleep(window_s)
        after, t1 = idle_seconds(), clock()
        if after is None:
            return clock() - start, None
        busy = cores - (after - before) / max(t1 - t0, 1e-9)  # cores in use over the window, on average
        if busy < busy_cores:
            return t1 - start, True
        if t1 - start + window_s > most_s + 1e-6:  # another look would end past most_s
            return t1 - start, False
