"""How many cores other programs used lately: the machine's busy time (/proc/stat) less this process's own.

A prefill is one long interval, so the decode loop's way of choosing threads (windows of steps, trials) cannot
serve it. What can: while this process waited for its next request, the machine's cores were either idle or
used by someone else (the browser, the class server's Streamlit, another job). Measured on this project's 2-core
machine with one core held by a busy loop, a 64-token prefill took 265 ms on 2 threads and 102 ms on 1 (256
tokens: 623 vs 411; 1024: 2600 vs 1790), while on free cores 2 threads win (76 vs 97 ms). So a run starts with
fewer threads when other programs kept cores busy since the last run ended (or since the engine loaded; this
process's own CPU time taken out), and its decode loop starts from there (engine/core/thread_governor.py tries
more threads again once cores go idle) — but only when the last run's decode loop had itself ended on fewer
threads, or there was no last run: a page drawing the last result between two runs (a burst, over by the next
click; measured: it sent the single-user page's runs to one thread, 1.39x the CLI's TPOT) is not a reason.
"""
from __future__ import annotations

import os
import time

from engine.core.thread_governor import read_idle_seconds, thread_choices

BUSY_SHARE = 0.5  # a core other programs used this much of counts as taken
MIN_INTERVAL = 0.1  # seconds: a shorter look back says nothing (back to back, a run starts where the last ended)


def own_cpu_seconds() -> float:
    """CPU-seconds this process (every thread) has used."""
    t = os.times()
    return t.user + t.system


def core_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class LoadWatch:
    """`mark()` when this process goes quiet (a run ended); `others_cores()` later: other programs' average cores."""

    def __init__(self, idle_seconds=read_idle_seconds, own=own_cpu_seconds, clock=time.perf_counter,
                 cores: int | None = None):
        self._idle_seconds, self._own, self._clock = idle_seconds, own, clock
        self.cores = cores or core_count()
        self.mark()

    def mark(self, last_threads: int | None = None) -> None:
        """From now on; `last_threads`: what the run that just ended decoded with at its end (None: no run yet)."""
        self._start = (self._idle_seconds(), self._own(), self._clock())
        self.last_threads = last_threads

    def others_cores(self) -> float | None:
        """Cores other programs kept busy on average since `mark()`; None where not measurable or too short."""
        idle0, own0, t0 = self._start
        idle, own, t = self._idle_seconds(), self._own(), self._clock()
        if idle is None or idle0 is None or t - t0 < MIN_INTERVAL:
            return None
        busy = self.cores * (t - t0) - (idle - idle0)  # CPU-seconds some program ran, this one included
        return max(busy - (own - own0), 0.0) / (t - t0)

    def threads_for_run(self, most: int) -> tuple[int, str]:
        """The threads a run should start with (the most of most, most/2, ..., 1 that fits the cores other programs
        left free, give or take `BUSY_SHARE` of a core), and why in a few words ('' when `most`)."""
        if self.last_threads is not None and self.last_threads >= most:  # the last run's decode kept every thread
            return most, ""
        others = self.others_cores()
        if others is None:  # too short a look back (runs back to back): the last run's own ending, if any, stands
            if self.last_threads is None:
                return most, ""
            return self.last_threads, "the run just before ended on them"
        room = self.cores - others + BUSY_SHARE
        threads = next((n for n in thread_choices(most) if n <= room), 1)
        return threads, (f"other programs kept {others:.1f} core(s) busy since the last run" if threads < most else "")


WATCH = LoadWatch()  # this process's: marked when each run ends (engine/core/generate.py)
