"""Slices: a long lab job shares the engine: between two of its points, the runs waiting then go first.

A sweep to 2048 tokens holds the engine for a minute; a class waiting behind it waits a minute. A job declared
`sliced` (engine/serving/scheduling/lab_jobs.py) reports after each point on the scheduler's thread: that callback
is a yield point where the scheduler runs the requests waiting at that moment, then lets the job go on. So a
waiting run starts after at most one slice (one point), and the job's numbers are untouched: each point is timed
on its own. Compare vLLM's chunked prefill and preemption: long work is cut so short work is not stuck behind it.
Mixed into engine/serving/scheduling/scheduler.py's Scheduler (its queue, lock and running list).
"""
from __future__ import annotations

import time

from engine.serving.scheduling.continuous_batch import Batch
from engine.serving.scheduling.work import Failed, Job, ModelSpec, Progress, Request, failure_message


class Slicing:
    """The scheduler's yield points. `slices` keeps how long each stretch of a sliced job held the engine."""

    def _slice_begin(self) -> None:
        self._slice_start = time.perf_counter()

    def _slice_end(self) -> None:
        self.slices.append(time.perf_counter() - self._slice_start)

    def _yield_point(self, job: Job) -> bool:
        """Run the requests waiting now (for models already loaded), then let the job go on; False if it was cancelled.

        Requests that arrive meanwhile wait for the next yield point, so the job always moves on. Jobs that wait
        stay queued: they run alone, after this one. The job's own numbers are untouched: each point is timed on its own.
        """
        self._slice_end()
        with self._cond:
            ready = [w for w in self._waiting if isinstance(w, Request) and not w.cancelled.is_set()
                     and self.pool.loaded(w.model)] if not self._stop else []
            for work in ready:
                self._waiting.remove(work)
            if ready:
                self._announce()
        if ready:
            job.emit(Progress(f"letting {len(ready)} waiting run(s) through between two points", -1.0))
            if self.mode == "batch":
                self._serve_batched(ready)
            else:
                for req in ready:
                    self._serve_alone(req)
        self._slice_begin()
        return not job.cancelled.is_set()

    def _serve_alone(self, req: Request) -> None:
        with self._cond:
            self._running.append(req)
        try:
            self._generate(req)
        except Exception as exc:  # one request's failure never stops the job
            req.emit(Failed(failure_message(exc)))
        self._done(req)

    def _serve_batched(self, ready: list[Request]) -> None:
        """Batch mode between two points: the waiting requests decode together (per model) until all have left."""
        by_model: dict[ModelSpec, list[Request]] = {}
        for req in ready:
            by_model.setdefault(req.model, []).append(req)
        for spec, reqs in by_model.items():
            batch = Batch(self.pool.get(spec), self.max_batch, adaptive_threads=self.adaptive_threads)
            while reqs or batch.size:
                while reqs and batch.has_room():
                    req = reqs.pop(0)
                    with self._cond:
                        self._running.append(req)
                    self._admit(batch, req)
                if batch.size:
                    batch.cancel_marked()
                    self._step(batch)
