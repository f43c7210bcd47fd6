"""The decode loop's thread count, chosen by measurement while it runs (CPU only).

A decode step is many short parallel operations (30 layers x matmuls, attention, norms), each ending at a barrier
where the model's threads wait for the slowest. When another program holds one of the cores (the browser drawing
the page, the class server's Streamlit, someone else's job), one thread waits for a CPU at every barrier and the
others spin: two threads on one free core run a step slower than one thread does. Linux says when that happens:
the threads' run-queue wait (engine/host/cpu_wait.py). So the loop looks at windows of steps:

- at its full thread count, a window whose steps waited for a CPU `wait_share` of their time or more starts a
  trial window with fewer threads;
- with fewer threads, a window during which the machine had idle time (/proc/stat) of at least `UP_IDLE` of a core
  per thread to add starts a trial with more (a program that holds a core leaves none; one drawing a page now and
  then leaves some, and there the trial, not the idle time, decides);
- a trial window is kept only if its median step is `margin` faster than the window before it, else the loop goes
  back and waits longer (doubling, up to `MAX_HOLD` windows) before its next trial.

On a quiet machine the steps never wait, so nothing changes and nothing is tried. Each step records the threads it
ran with (DecodeStep.threads) and the trace says every kept change and why (Trace.threads_note).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from engine.host.proc_stat import read_idle_seconds

MAX_HOLD = 16  # windows between a lost trial and the next, at most
# a run that starts below its most threads (machine_load.py) looks again after this many steps, not a whole window:
# the burst it saw before starting (the page drawing the Run click) is often over, and each step on too few threads costs
FIRST_LOOK = 3
UP_IDLE = 0.25  # idle cores per added thread that start a trial upward (a trial that loses costs one window)
# the wait share that starts a trial with fewer threads: a core held by a busy loop made the steps wait ~half their
# time (one thread won); a browser-like program ~a quarter (one thread lost), so the line sits between them
WAIT_SHARE = 0.35


def thread_choices(most: int) -> list[int]:
    """most, most/2, most/4, ..., 1 (descending, no repeats)."""
    choices, n = [], most
    while n >= 1:
        choices.append(n)
        n //= 2
    return choices if choices[-1] == 1 else choices + [1]


def use_threads(threads: int) -> None:
    """torch's threads for what runs next (set only when they differ: the call is cheap, not free)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@dataclass
class ThreadChange:
    step: int  # the first decode step (0-based) that ran with `threads`
    threads: int
    why: str


class ThreadGovernor:
    """Feed it each step's seconds and CPU wait; it answers the threads for the next step."""

    def __init__(self, most: int, window: int = 8, wait_share: float = WAIT_SHARE, margin: float = 0.05,
                 idle_seconds=read_idle_seconds, clock=None, start: int | None = None):
        self.most, self.window, self.wait_share, self.margin = most, window, wait_share, margin
        self.choices = thread_choices(most)
        self.threads = start if start in self.choices else most  # a run may start lower (engine/host/machine_load.py)
        self.changes: list[ThreadChange] = []  # kept changes only (trials that lost are not changes)
        self.trials = 0
        self._idle_seconds, self._clock = idle_seconds, clock or time.perf_counter
        self._seconds: list[float] = []
        self._waits: list[float] = []
        self._medians: dict[int, float] = {}  # threads -> median step of its latest window
        self._trial_from: int | None = None  # where a trial goes back to if it is not faster
        self._trial_why = ""
        self._hold, self._backoff = 0, 1
        self._steps = 0
        self._first = FIRST_LOOK if self.threads < most else None  # a start below most is checked early
        self._mark = (self._idle_seconds(), self._clock())

    @property
    def kept_threads(self) -> int:
        """The threads measurement has kept: during a trial, the ones it goes back to unless the trial wins. What a
        run that ends mid-trial decoded on, for the next run's start (machine_load.py): an unfinished trial is no
        verdict."""
        return self._trial_from if self._trial_from is not None else self.threads

    @property
    def steps(self) -> int:
        """Steps observed so far (ThreadChange.step counts in these)."""
        return self._steps

    def restart(self) -> int:
        """The work per step changed (a batch's riders joined or left): drop the window so far and what earlier
        windows measured, and end a trial by going back. Returns the threads for the next step."""
        self._seconds, self._waits, self._medians = [], [], {}
        if self._trial_from is not None:
            self.threads, self._trial_from = self._trial_from, None
        self._mark = (self._idle_seconds(), self._clock())
        return self.threads

    def start_at(self, threads: int, why: str) -> int:
        """Start again on `threads` (a batch forming from empty, on what other programs left free: machine_load.py);
        below `most` it is a change with its reason. Returns the threads for the next step."""
        self.restart()
        if threads in self.choices and threads != self.threads:
            self.threads = threads
            self.changes.append(ThreadChange(self._steps, threads, why))
        self._first = FIRST_LOOK if self.threads < self.most else None
        return self.threads

    def observe(self, seconds: float, wait: float) -> int:
        """One finished step: its seconds and its CPU wait (longest waiting thread). Returns the next step's threads."""
        self._steps += 1
        self._seconds.append(seconds)
        self._waits.append(wait)
        if len(self._seconds) >= (self._first or self.window):
            self._first = None
            self._decide()
        return self.threads

    def _idle_cores(self) -> float | None:
        """Idle cores, on average, since the last window ended (None: /proc/stat not readable)."""
        idle, t = self._idle_seconds(), self._clock()
        (idle0, t0), self._mark = self._mark, (idle, t)
        if idle is None or idle0 is None or t <= t0:
            return None
        return (idle - idle0) / (t - t0)

    def _decide(self) -> None:
        median = statistics.median(self._seconds)
        share = sum(self._waits) / max(sum(self._seconds), 1e-12)
        idle = self._idle_cores()
        self._seconds, self._waits = [], []
        now, self._medians[self.threads] = self.threads, median
        if self._trial_from is not None:  # the window just measured was a trial: keep it or go back
            back, self._trial_from = self._trial_from, None
            if median < self._medians[back] * (1 - self.margin):
                self._backoff = 1
                self.changes.append(ThreadChange(self._steps - self.window, now,
                                                 f"{self._trial_why}; measured {median * 1e3:.1f} ms a step with {now}, "
                                                 f"{self._medians[back] * 1e3:.1f} ms with {back}"))
            else:
                self.threads = back
                self._hold, self._backoff = self._backoff, min(2 * self._backoff, MAX_HOLD)
            return
        if self._hold > 0:  # a trial lost lately: wait before the next
            self._hold -= 1
            return
        index = self.choices.index(now)
        fewer = self.choices[index + 1] if index + 1 < len(self.choices) else None
        more = self.choices[index - 1] if index > 0 else None
        if fewer is not None and share >= self.wait_share:
            self._try(fewer, f"the steps had waited for a CPU {share:.0%} of their time")
        elif more is not None and (idle is None or idle >= UP_IDLE * (more - now)):
            self._try(more, "a periodic try: no idle-time reading here" if idle is None else f"{idle:.1f} core(s) idle")

    def _try(self, threads: int, why: str) -> None:
        self._trial_from, self._trial_why = self.threads, why
        self.threads = threads
        self.trials += 1

    def note(self, since: int = 0) -> str:
        """One plain sentence on what changed and why ('' when nothing did). `since` (a value of `steps`): only
        what applied from then on, the change in force at that step included; steps counted from `since`."""
        earlier = [c for c in self.changes if c.step < since]
        changes = earlier[-1:] + [c for c in self.changes if c.step >= since]
        if not changes or changes[0].threads == self.most and len(changes) == 1 and changes[0].step < since:
            return ""
        said = "; then ".join(f"from step {max(c.step - since, 0) + 1} on {c.threads} thread(s) ({c.why})"
                              for c in changes[:2])
        more = f"; and {len(changes) - 2} change(s) more" if len(changes) > 2 else ""
        return f"{said}{more}"
