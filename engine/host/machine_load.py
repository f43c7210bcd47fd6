"""How many cores other programs used lately: the machine's busy time (/proc/stat) less this process's own.

A prefill is one long interval, so the decode loop's way of choosing threads (windows of steps, trials) cannot serve
it. Instead a run starts with fewer threads when other programs kept cores busy in the last `RECENT_S` before it
(this process's own CPU time taken out), and its decode loop starts from there (thread_governor.py tries more
threads again once cores go idle), but only when the last run's decode loop had itself ended on fewer threads, or
there was no last run: a page drawing the last result between two runs is a burst, not a reason. Measurements and
why: docs/decisions/threads-under-load.md.
"""
from __future__ import annotations

import collections
import os
import time

from engine.host.proc_stat import core_count, read_idle_seconds
from engine.host.thread_governor import thread_choices

BUSY_SHARE = 0.5  # a core other programs used this much of counts as taken
MIN_INTERVAL = 0.1  # seconds: a shorter look back says nothing (back to back, a run starts where the last ended)
RECENT_S = 1.0  # seconds: with ticks, look back this far (to the newest tick at least this old), not further


def own_cpu_seconds() -> float:
    """CPU-seconds this process (every thread) has used."""
    t = os.times()
    return t.user + t.system


class LoadWatch:
    """`mark()` when this process goes quiet (a run ended); `others_cores()` later: other programs' average cores."""

    def __init__(self, idle_seconds=read_idle_seconds, own=own_cpu_seconds, clock=time.perf_counter,
                 cores: int | None = None):
        self._idle_seconds, self._own, self._clock = idle_seconds, own, clock
        self.cores = cores or core_count()
        self._ticks: collections.deque = collections.deque(maxlen=8)  # (idle, own, clock) snapshots while idle
        self.mark()

    def _now(self) -> tuple:
        return self._idle_seconds(), self._own(), self._clock()

    def mark(self, last_threads: int | None = None) -> None:
        """From now on; `last_threads`: what the run that just ended decoded with at its end (None: no run yet)."""
        self._ticks.clear()
        self._start = self._now()
        self.last_threads = last_threads

    def tick(self) -> None:
        """A snapshot while idle (the scheduler's wait calls it every half second): the look back then starts at
        the newest snapshot at least RECENT_S old, when there is one."""
        self._ticks.append(self._now())

    def others_cores(self) -> float | None:
        """Cores other programs kept busy on average since `mark()`, or over about the last RECENT_S where ticks
        allow; None where not measurable or too short."""
        idle0, own0, t0 = self._start
        idle, own, t = self._now()
        recent = [snap for snap in list(self._ticks) if t - snap[2] >= RECENT_S]  # a copy: ticks come from another thread
        if recent:
            idle0, own0, t0 = recent[-1]
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
