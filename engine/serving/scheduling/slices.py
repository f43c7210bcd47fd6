"""Slices: a long lab job shares the engine: between two of its points, the runs waiting then go first.

A sweep to 2048 tokens holds the engine for a minute; a class waiting behind it waits a minute. A job declared
`sliced` (engine/serving/scheduling/lab_jobs.py) reports after each point on the engine's thread: that callback is a
yield point (`between_points`), where the engine serves the requests waiting at that moment, then lets the job go
on. So a waiting run starts after at most one slice (one point), and the job's numbers are untouched: each point is
timed on its own. Compare vLLM's chunked prefill and preemption: long work is cut so short work is not stuck
behind it.

A Slices object is the job's side of that contract: it times each stretch the job held the engine and calls
`serve_waiting(job)`, which the Scheduler (engine/serving/scheduling/scheduler.py) provides, at each yield point.
It knows nothing of the Scheduler's queue or lock; the job runner (job_runner.py) knows only these three methods.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator

from engine.serving.scheduling.work import Job


class Slices:
    """The stretches sliced jobs held the engine (seconds, the latest 256) and the yield point between two."""

    def __init__(self, serve_waiting: Callable[[Job], None] | None = None):
        self.held: deque[float] = deque(maxlen=256)
        self._serve_waiting = serve_waiting  # None: a job runs whole (nothing may run between its points)
        self._start = 0.0

    def begin(self) -> None:
        self._start = time.perf_counter()

    def end(self) -> None:
        self.held.append(time.perf_counter() - self._start)

    def between_points(self, job: Job) -> bool:
        """The stretch that ends here is kept; the requests waiting now run; then the job goes on unless cancelled."""
        self.end()
        if self._serve_waiting is not None:
            self._serve_waiting(job)
        self.begin()
        return not job.cancelled.is_set()

    @property
    def longest(self) -> float:
        """The longest stretch kept: at most this long a waiting run waited behind a lab job."""
        return max(self.held, default=0.0)

    def __len__(self) -> int:
        return len(self.held)

    def __iter__(self) -> Iterator[float]:
        return iter(self.held)
