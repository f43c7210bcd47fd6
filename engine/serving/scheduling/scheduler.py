"""One scheduler for every consumer: the dashboard's sessions, `python -m engine serve` and the labs.

A single thread owns the models and runs all the work in one engine-core loop (`_serve`: schedule, execute, update,
as vLLM's EngineCore and nano-vllm's LLMEngine step), so no two runs ever compete for the device. Two modes:
  queue  one request at a time, through exactly the path `python -m engine generate` takes (engine/core/generate.py);
  batch  continuous batching (continuous_batch.py); with max_num_batched_tokens, a joining prompt is prefilled in
         chunks that share the riders' steps.
Jobs run alone (job_runner.py); a sliced one yields between its points (slices.py) to the requests waiting then.
A waiting item's queue time is measured and kept out of TTFT (waiting_queue.py). The walk through one Run:
docs/architecture.md, "One Run, from the button to the token".
"""
from __future__ import annotations

import threading
import time
from collections import deque

from engine.core.capture import layers_within_budget
from engine.core.generate import generate
from engine.errors import EngineError
from engine.host.machine_load import WATCH
from engine.host.run_watch import RunWatch
from engine.serving.scheduling.chunked_prefill import StepRecord
from engine.serving.scheduling.continuous_batch import Batch
from engine.serving.scheduling.job_runner import run_lab_job
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.os_memory import release_free_memory
from engine.serving.scheduling.slices import Slices
from engine.serving.scheduling.token_budget import check_token_budget
from engine.serving.scheduling.waiting_queue import WaitingQueue, check_request, check_with_model
from engine.serving.scheduling.work import (
    Done,
    Failed,
    Job,
    Progress,
    Request,
    Started,
    Work,
    failure_message,
    token_event,
)

MODES = ("queue", "batch")


# idle this long after work before what it freed goes back to the OS: a request right after the last one finds its
# KV cache's pages still mapped (handed back, a 128-token request's cache took 4.4 ms of page faults before its
# prefill, outside the prefill's timing but inside the client's TTFT)
TRIM_AFTER_S = 2.0


class Scheduler:
    def __init__(self, mode: str = "queue", *, max_queue: int = 64, max_new_tokens_cap: int = 4096,
                 max_batch: int = 8, pool: ModelPool | None = None, max_num_batched_tokens: int | None = None,
                 adaptive_threads: bool = True):
        if mode not in MODES:
            raise EngineError(f"unknown scheduling mode '{mode}'; use one of: {', '.join(MODES)}")
        self.mode = mode
        self.max_queue, self.max_new_tokens_cap, self.max_batch = max_queue, max_new_tokens_cap, max_batch
        self.max_num_batched_tokens = check_token_budget(max_num_batched_tokens, max_batch)  # None: whole prefills
        self.step_log: deque[StepRecord] = deque(maxlen=4096)  # batch mode's engine steps: who shared each one
        self.pool = pool or ModelPool()
        self.adaptive_threads = adaptive_threads  # queue mode's runs: threads chosen while decoding (generate())
        self._waiting = WaitingQueue(max_queue)  # its Estimates are refined by every finished run
        self._cond = threading.Condition()
        self._running: list[Work] = []  # what the thread works on now (several in batch mode)
        self._stop = False
        self._untidy: float | None = None  # when work last ended, while what it freed is not handed back (os_memory)
        self._thread = threading.Thread(target=self._loop, name="two-bends-scheduler", daemon=True)
        self.finished = 0
        self.slices = Slices(self._serve_waiting)  # a sliced job's stretches, and what runs between two of its points

    # --- consumers' side (any thread) -----------------------------------------------------------------------
    def start(self) -> Scheduler:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Fail what waits, cancel what runs (it ends at its next step), and wait for the thread to end.

        Every submitted request gets its final event: what waits Failed now, what runs Done or Failed
        when its step is over (riders still in the batch when the thread leaves its loop are failed there),
        and a submit after stop is refused.

        Joining matters: a thread still inside torch when the interpreter exits aborts the process
        ("terminate called without an active exception", exit code 134).
        """
        with self._cond:
            self._stop = True
            self._waiting.fail_all("the server is shutting down")
            for work in self._running:
                work.cancelled.set()
            self._cond.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def submit(self, work: Work) -> Work:
        """Queue a request or job; raises EngineError for a request over the caps, QueueFull when full.

        A request's values are checked here, once; what needs the model (prompt ids against its vocabulary,
        prompt + max_new_tokens against its context) is checked when the model is at hand: by generate in
        queue mode, by `_admit` in batch mode.
        """
        check_request(work, self.max_new_tokens_cap)
        with self._cond:
            self._waiting.add(work, self._running, stopping=self._stop)
            self._cond.notify_all()
        return work

    def cancel(self, work: Work) -> None:
        work.cancel()
        with self._cond:
            self._waiting.cancel(work, self._running)
            self._cond.notify_all()

    @property
    def n_waiting(self) -> int:
        return len(self._waiting)

    @property
    def n_running(self) -> int:
        return len(self._running)

    def _announce(self) -> None:
        """Tell every waiting item its position (caller holds the lock)."""
        self._waiting.announce(self._running)

    # --- the scheduler's thread: one engine-core loop -----------------------------------------------------------
    def _loop(self) -> None:
        self._serve(self._take)

    def _serve(self, take) -> None:
        """The engine-core loop (vLLM's EngineCore.step, nano-vllm's LLMEngine.step), until `take` has nothing more
        and the batch is empty, or the server stops:

          schedule  `take(batch)`: the work that starts now: a request that joins the running batch (batch mode, same
                    model, room left), or work that runs alone (queue mode's request, a lab job); None lets the
                    batch step
          execute   a request that joins is prefilled into its row (or, with a token budget, its chunks ride the next
                    steps); work that runs alone runs to its end; then one step of the batch: every rider's next token
                    and the joiners' chunks in one pass (engine/serving/scheduling/continuous_batch.py)
          update    the events go out as each token is ready (FirstToken, Token, Done or Failed); what finished
                    leaves the running list, and the waiting line learns its cost

        The main loop takes from the waiting line (`_take`, which blocks while idle); between two points of a sliced
        lab job the same loop serves the requests that were waiting then (`_serve_waiting`)."""
        batch: Batch | None = None
        while not self._stop:
            work = take(batch)  # schedule
            if work is None and (batch is None or not batch.size):
                break  # nothing to run: `_take` only says so once the server stops
            try:
                if work is not None and self.mode == "batch" and isinstance(work, Request):  # execute
                    lm = self.pool.get(work.model)
                    if batch is None or batch.lm is not lm:
                        batch = Batch(lm, self.max_batch, self.max_num_batched_tokens, self.step_log,
                                      adaptive_threads=self.adaptive_threads, spec=work.model)
                    self._admit(batch, work)
                elif work is not None:
                    self._run_alone(work)
                    self._done(work)  # update
                if batch is not None and batch.size:
                    batch.cancel_marked()
                    batch.step_or_fail()
                    self._reap(batch)  # update: the finished riders leave the running list
            except Exception as exc:  # one request's failure never stops the server
                if work is not None:
                    work.emit(Failed(failure_message(exc)))
                    self._done(work)
                elif batch is not None and batch.size:  # the batch's own bookkeeping failed: end its riders
                    batch.fail_all(failure_message(exc))
                    self._reap(batch)
            self._untidy = time.monotonic()
        if batch is not None and batch.size:  # stopped between two steps: nobody may wait forever
            batch.fail_all("the server is shutting down")
            self._reap(batch)

    @staticmethod
    def _joins(work: Work | None, batch: Batch) -> bool:
        """Whether `work` may join the running `batch` now: a request for the same model, with a row free."""
        return isinstance(work, Request) and work.model == batch.spec and batch.has_room()

    def _take(self, batch: Batch | None) -> Work | None:
        """Schedule from the waiting line: the next work to start, or None. With a running batch only requests for the
        same model may join (exclusive work waits for it to drain); idle, it waits for work."""
        with self._cond:
            while not self._stop:
                self._waiting.drop_cancelled()
                head = self._waiting.head()
                if batch is not None and batch.size and not self._joins(head, batch):
                    return None  # let the batch step
                if head is not None:
                    self._waiting.popleft()
                    self._running.append(head)
                    self._announce()
                    return head
                self._idle()
            return None

    def _idle(self) -> None:
        """Wait for work (caller holds the lock). Once, TRIM_AFTER_S after work ended, hand what it freed back to the
        OS (os_memory.py); the wait also ticks the machine-load watch a run starts from."""
        wait = 0.5
        if self._untidy is not None:
            idle = time.monotonic() - self._untidy
            if idle >= TRIM_AFTER_S:
                self._untidy = None
                release_free_memory()
            else:
                wait = min(wait, TRIM_AFTER_S - idle)
        self._cond.wait(timeout=wait)
        WATCH.tick()  # the machine's load over the last ~second is what the next run starts from

    def _done(self, work: Work) -> None:
        with self._cond:
            if work in self._running:
                self._running.remove(work)
            self.finished += 1

    def _admit(self, batch: Batch, req: Request) -> None:
        try:
            check_with_model(req, batch.lm)
            batch.admit(req, time.perf_counter())
        except Exception as exc:
            req.emit(Failed(failure_message(exc)))
        self._reap(batch)

    def _reap(self, batch: Batch) -> None:
        """Requests that left the batch are no longer running."""
        inside = {id(s.request) for s in batch.seqs}
        for work in [w for w in self._running if isinstance(w, Request) and id(w) not in inside]:
            self._done(work)

    def _run_alone(self, work: Work) -> None:
        """Queue mode's request, or a registered lab job (engine/serving/scheduling/job_runner.py; a sliced one yields at
        its points)."""
        if isinstance(work, Request):
            self._generate(work)
        elif (seconds := run_lab_job(work, self.pool, self.slices)) is not None:
            self._waiting.estimates.learn_job(seconds)

    def _generate(self, req: Request) -> None:
        """Queue mode: the request alone, through exactly the path `python -m engine generate` takes."""
        lm = self.pool.get(req.model)
        started = time.perf_counter()
        req.emit(Started(started - req.arrival))
        sent = [0]

        def on_step(trace) -> bool:
            for i in range(sent[0], trace.n_output):  # normally exactly one new token
                piece = trace.output_tokens[i] if i < len(trace.output_tokens) else ""
                req.emit(token_event(trace, i, trace.output_ids[i], piece))
            sent[0] = trace.n_output
            return not req.cancelled.is_set()

        def on_capture(trace) -> None:
            req.emit(Progress("capturing attention for the pictures (not timed)", 1.0))

        layers = None  # the budget needs counts only (submit checked max_new_tokens; generate checks the context)
        if req.capture_attention:
            layers = layers_within_budget(lm.config, len(req.prompt_ids), req.max_new_tokens, preferred=req.capture_layer)
        trace = generate(lm, req.prompt_ids, req.max_new_tokens, req.params, chat=req.chat, on_step=on_step,
                         capture_attention=req.capture_attention, capture_layers=layers, on_capture=on_capture,
                         watch=RunWatch(self.adaptive_threads))
        on_step(trace)  # the last token (generate does not call back after the final one)
        trace.queue_seconds = started - req.arrival
        trace.prompt_text = req.prompt_text or trace.prompt_text
        trace.settings["scheduler"] = "queue"
        if trace.stop_reason == "cancelled":
            req.emit(Failed("cancelled", cancelled=True))
            return
        self._waiting.estimates.learn(trace)
        req.emit(Done(trace))

    # --- between two points of a sliced job (engine/serving/scheduling/slices.py) ----------------------------
    def _serve_waiting(self, job: Job) -> None:
        """Run the requests waiting now (for models already loaded) through the same loop, then return to the job.

        Requests that arrive meanwhile wait for the next yield point, so the job always moves on. Jobs that wait
        stay queued: they run alone, after this one. The job's own numbers are untouched: each point is timed on its own.
        """
        with self._cond:
            ready = [w for w in self._waiting if isinstance(w, Request) and not w.cancelled.is_set()
                     and self.pool.loaded(w.model)] if not self._stop else []
            for work in ready:
                self._waiting.remove(work)
            self._running.extend(ready)  # running from here: stop() and status() see them
            if ready:
                self._announce()
        if ready:
            job.emit(Progress(f"letting {len(ready)} waiting run(s) through between two points", -1.0))
            self._serve(lambda batch: self._take_ready(ready, batch))
        for req in ready:  # the server stopped before they started: each still gets its final event
            req.emit(Failed("the server is shutting down"))
            self._done(req)

    def _take_ready(self, ready: list[Request], batch: Batch | None) -> Request | None:
        """Schedule from `ready` (already on the running list), in order: None when it is empty, or while the batch
        runs another model or is full."""
        while ready:
            if batch is not None and batch.size and not self._joins(ready[0], batch):
                return None
            req = ready.pop(0)
            if not req.cancelled.is_set():
                return req
            req.emit(Failed("cancelled", cancelled=True))  # cancelled on its way here: it never starts
            self._done(req)
        return None
