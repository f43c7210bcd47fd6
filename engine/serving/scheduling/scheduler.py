"""One scheduler for every consumer: the dashboard's sessions, `python -m engine serve` and the labs.

A single thread owns the models and runs all the work, so no two runs ever compete for the device
and every number stays the one the engine measured. Two modes, chosen by whoever starts the server:
  queue  one request at a time, first come first served (the CLI's numbers, whoever is waiting);
  batch  continuous batching: requests join the running batch between decode steps (engine/serving/scheduling/continuous_batch.py);
         with max_num_batched_tokens, a joining prompt is prefilled in chunks that share the riders' steps.
Jobs (lab measurements, attention captures, model loads) run alone; a job declared sliced (a sweep) yields
between its points: the requests waiting then run before its next point, so a waiting run starts after at most
one slice, and each point stays timed on its own. Waiting work gets its position and an expected wait; its queue
time is measured and kept out of TTFT.
"""
from __future__ import annotations

import threading
import time
import traceback
from collections import deque

from engine.core.capture import layers_within_budget
from engine.core.generate import generate
from engine.core.metrics import summarize
from engine.core.prompting import check_context, check_max_new_tokens, encode_prompt
from engine.errors import EngineError
from engine.serving.scheduling import lab_jobs as jobs
from engine.serving.scheduling.continuous_batch import Batch, StepRecord, check_token_budget
from engine.serving.scheduling.model_pool import ModelPool
from engine.serving.scheduling.os_memory import release_free_memory
from engine.serving.scheduling.slices import Slicing
from engine.serving.scheduling.work import Done, Failed, FirstToken, Job, Progress, Queued, QueueFull, Request, Started, Token, Work

MODES = ("queue", "batch")


class Scheduler(Slicing):
    def __init__(self, mode: str = "queue", *, max_queue: int = 64, max_new_tokens_cap: int = 4096,
                 max_batch: int = 8, pool: ModelPool | None = None, max_num_batched_tokens: int | None = None):
        if mode not in MODES:
            raise EngineError(f"unknown scheduling mode '{mode}'; use one of: {', '.join(MODES)}")
        self.mode = mode
        self.max_queue, self.max_new_tokens_cap, self.max_batch = max_queue, max_new_tokens_cap, max_batch
        self.max_num_batched_tokens = check_token_budget(max_num_batched_tokens, max_batch)  # None: whole prefills
        self.step_log: deque[StepRecord] = deque(maxlen=4096)  # batch mode's engine steps: who shared each one
        self.pool = pool or ModelPool()
        self._waiting: deque[Work] = deque()
        self._cond = threading.Condition()
        self._running: list[Work] = []  # what the thread works on now (several in batch mode)
        self._stop = False
        self._untidy = False  # something ran since memory was last handed back (os_memory)
        self._thread = threading.Thread(target=self._loop, name="two-bends-scheduler", daemon=True)
        self._est = {"prefill_s_per_token": 0.002, "tpot_s": 0.05, "job_s": 10.0}  # refined by every finished run
        self.finished = 0
        self.slices: deque[float] = deque(maxlen=256)  # seconds a sliced job held the engine between yield points
        self._slice_start = 0.0

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
            for work in self._waiting:
                work.emit(Failed("the server is shutting down"))
            self._waiting.clear()
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
        if isinstance(work, Request):
            check_max_new_tokens(work.max_new_tokens, self.max_new_tokens_cap)
            work.params.checked()
        with self._cond:
            if self._stop:
                raise EngineError("the server is shutting down; it takes no more requests")
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"the queue is full ({self.max_queue} requests waiting); try again in a moment",
                                retry_after=self._expected_wait(len(self._waiting)))
            self._waiting.append(work)
            self._announce()
            self._cond.notify_all()
        return work

    def cancel(self, work: Work) -> None:
        work.cancel()
        with self._cond:
            if work in self._waiting:
                self._waiting.remove(work)
                work.emit(Failed("cancelled", cancelled=True))
                self._announce()
            self._cond.notify_all()

    @property
    def n_waiting(self) -> int:
        return len(self._waiting)

    @property
    def n_running(self) -> int:
        return len(self._running)

    # --- estimates ----------------------------------------------------------------------------------------
    def _cost(self, work: Work) -> float:
        if isinstance(work, Request):
            return len(work.prompt_ids) * self._est["prefill_s_per_token"] + work.max_new_tokens * self._est["tpot_s"]
        return self._est["job_s"]

    def _expected_wait(self, position: int) -> float:
        ahead = list(self._waiting)[:position]
        running = sum(self._cost(w) for w in self._running) / 2  # on average half done
        return running + sum(self._cost(w) for w in ahead)

    def _announce(self) -> None:
        """Tell every waiting item its position (caller holds the lock)."""
        for i, work in enumerate(self._waiting):
            work.emit(Queued(i + 1, self._expected_wait(i)))

    def _learn(self, trace) -> None:
        s = summarize(trace)
        if trace.n_prompt and s.ttft_s > 0:
            self._est["prefill_s_per_token"] = 0.7 * self._est["prefill_s_per_token"] + 0.3 * s.ttft_s / trace.n_prompt
        if s.tpot_s == s.tpot_s:
            self._est["tpot_s"] = 0.7 * self._est["tpot_s"] + 0.3 * s.tpot_s

    # --- the scheduler's thread -----------------------------------------------------------------------------
    def _take(self, batch: Batch | None) -> Work | None:
        """Next work to start, or None. With a running batch only requests for the same model may join."""
        with self._cond:
            while not self._stop:
                while self._waiting and self._waiting[0].cancelled.is_set():
                    self._waiting.popleft().emit(Failed("cancelled", cancelled=True))
                head = self._waiting[0] if self._waiting else None
                if batch is not None and batch.size:
                    joins = isinstance(head, Request) and head.model == self._batch_spec and batch.has_room()
                    if not joins:
                        return None  # let the batch step; exclusive work waits for it to drain
                if head is not None:
                    self._waiting.popleft()
                    self._running.append(head)
                    self._announce()
                    return head
                if batch is not None and batch.size:
                    return None
                if self._untidy:  # idle after work: hand what it freed back to the OS (~0.1 ms), once
                    self._untidy = False
                    release_free_memory()
                self._cond.wait(timeout=0.5)
            return None

    def _loop(self) -> None:
        batch: Batch | None = None
        self._batch_spec = None
        while not self._stop:
            work = self._take(batch)
            if work is None and (batch is None or not batch.size):
                continue
            self._untidy = True
            try:
                if work is not None and self.mode == "batch" and isinstance(work, Request):
                    lm = self.pool.get(work.model)
                    if batch is None or batch.lm is not lm:
                        batch = Batch(lm, self.max_batch, self.max_num_batched_tokens, self.step_log)
                        self._batch_spec = work.model
                    self._admit(batch, work)
                elif work is not None:
                    self._run_alone(work)
                    self._done(work)
                if batch is not None and batch.size:
                    batch.cancel_marked()
                    self._step(batch)
            except Exception as exc:  # one request's failure never stops the server
                if work is not None:
                    work.emit(Failed(_message(exc)))
                    self._done(work)
                elif batch is not None and batch.size:  # the batch's own bookkeeping failed: end its riders
                    batch.fail_all(_message(exc))
                    self._reap(batch)
        if batch is not None and batch.size:  # stopped between two steps: nobody may wait forever
            batch.fail_all("the server is shutting down")
            self._reap(batch)

    @staticmethod
    def _message_of(exc: Exception) -> str:
        return _message(exc)

    def _done(self, work: Work) -> None:
        with self._cond:
            if work in self._running:
                self._running.remove(work)
            self.finished += 1

    def _admit(self, batch: Batch, req: Request) -> None:
        try:  # what submit could not check without the model: the same checks generate makes
            req.prompt_ids = encode_prompt(batch.lm, req.prompt_ids)
            check_context(batch.lm, len(req.prompt_ids), req.max_new_tokens)
            req.params.checked(batch.lm.config.vocab_size)  # top_k against this vocabulary
            batch.admit(req, time.perf_counter())
        except Exception as exc:
            req.emit(Failed(_message(exc)))
        self._reap(batch)

    def _step(self, batch: Batch) -> None:
        try:
            batch.step()
        except Exception as exc:
            batch.fail_all(f"the batched decode step failed: {_message(exc)}")
        self._reap(batch)

    def _reap(self, batch: Batch) -> None:
        """Requests that left the batch are no longer running."""
        inside = {id(s.request) for s in batch.seqs}
        for work in [w for w in self._running if isinstance(w, Request) and id(w) not in inside]:
            self._done(work)

    def _run_alone(self, work: Work) -> None:
        if isinstance(work, Request):
            self._generate(work)
        else:
            self._job(work)

    def _generate(self, req: Request) -> None:
        """Queue mode: the request alone, through exactly the path `python -m engine generate` takes."""
        lm = self.pool.get(req.model)
        started = time.perf_counter()
        req.emit(Started(started - req.arrival))
        sent = [0]

        def on_step(trace) -> bool:
            for i in range(sent[0], trace.n_output):  # normally exactly one new token
                piece = trace.output_tokens[i] if i < len(trace.output_tokens) else ""
                if i == 0:
                    req.emit(FirstToken(trace.prefill_seconds, trace.output_ids[0], piece))
                else:
                    req.emit(Token(trace.steps[i - 1], trace.output_ids[i], piece))
            sent[0] = trace.n_output
            return not req.cancelled.is_set()

        def on_capture(trace) -> None:
            req.emit(Progress("capturing attention for the pictures (not timed)", 1.0))

        layers = None  # the budget needs counts only (submit checked max_new_tokens; generate checks the context)
        if req.capture_attention:
            layers = layers_within_budget(lm.config, len(req.prompt_ids), req.max_new_tokens, preferred=req.capture_layer)
        trace = generate(lm, req.prompt_ids, req.max_new_tokens, req.params, chat=req.chat, on_step=on_step,
                         capture_attention=req.capture_attention, capture_layers=layers, on_capture=on_capture)
        on_step(trace)  # the last token (generate does not call back after the final one)
        trace.queue_seconds = started - req.arrival
        trace.prompt_text = req.prompt_text or trace.prompt_text
        trace.settings["scheduler"] = "queue"
        if trace.stop_reason == "cancelled":
            req.emit(Failed("cancelled", cancelled=True))
            return
        self._learn(trace)
        req.emit(Done(trace))

    def _job(self, job: Job) -> None:
        """A registered lab job (engine/serving/scheduling/lab_jobs.py): name looked up, arguments checked, its declared progress passed."""
        lab = jobs.lookup(job.name)  # EngineError for a name the registry does not hold
        kwargs = lab.bind(job.args, job.kwargs)  # EngineError for missing, unknown or mistyped arguments
        function = lab.function()
        started = time.perf_counter()
        job.emit(Started(started - job.arrival))

        def report_progress(message: str, fraction: float) -> bool:  # "progress": (message, fraction)
            if job.cancelled.is_set():
                return False
            job.emit(Progress(message, float(fraction)))
            return self._yield_point(job) if lab.sliced else True

        def report_point(partial) -> bool:  # "on_point": a partial result after each point
            if job.cancelled.is_set():
                return False
            job.emit(Progress("", -1.0, partial))
            return self._yield_point(job) if lab.sliced else True

        def loading(message: str, fraction: float) -> None:
            job.emit(Progress(message, fraction))

        lm = self.pool.get(job.model, progress=loading)
        self._slice_start = time.perf_counter()
        if lab.progress is not None:
            kwargs[lab.progress] = {"progress": report_progress, "on_point": report_point}[lab.progress]
        try:
            result = function(lm, **kwargs)
        except Exception:
            if not job.cancelled.is_set():
                raise
        if lab.sliced:
            self.slices.append(time.perf_counter() - self._slice_start)  # the stretch after its last yield point
        if job.cancelled.is_set():  # the function noticed (its callback returned False) or finished anyway
            job.emit(Failed("cancelled", cancelled=True))
            return
        self._est["job_s"] = 0.5 * self._est["job_s"] + 0.5 * (time.perf_counter() - started)
        job.emit(Done(result))


def _message(exc: Exception) -> str:
    """One clear line for a failure: an EngineError's own words, else the exception's first line and where."""
    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory: try a shorter prompt or fewer output tokens"
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (at {where.name})"

