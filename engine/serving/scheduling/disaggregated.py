"""Disaggregated prefill and decode: the valley and the bridge as two worker processes, the KV cache carried between.

A long prompt entering the valley stops every rider on the bridge when one engine does both (batch mode shows
that stall). Here each bend has its own worker, with its own torch threads ("two kinds of cards"): the prefill
worker runs prompts, the decode worker steps the riders; each prefilled cache crosses in shared memory
(engine/serving/scheduling/kv_handover.py). The price: the crossing (bytes and seconds, per request) and a side
that idles while the other works. The coordinator here has the Scheduler's consumer side (start, submit, cancel,
stop, n_waiting, n_running, finished) and its waiting line (waiting_queue.py), so the worker, `engine serve` and
the Traffic lab use it unchanged; each worker process is a WorkerSide (worker_side.py). It keeps `timeline` (every
worker step) and `handovers` (every cart). Compare DistServe (Zhong et al. 2024), Splitwise (Patel et al. 2024) and
vLLM's disaggregated prefill.
"""
from __future__ import annotations

import os
import threading
from collections import deque

from engine.errors import EngineError
from engine.serving.scheduling.kv_handover import block_path, discard_path, new_session, sweep, sweep_orphans
from engine.serving.scheduling.slices import Slices
from engine.serving.scheduling.waiting_queue import WaitingQueue, check_request
from engine.serving.scheduling.work import FINAL, Done, Failed, Request, Work
from engine.serving.scheduling.worker_side import DECODE, NAMES, PREFILL, WorkerSide

MODE = "disaggregated"


class DisaggregatedScheduler:
    """The coordinator: one queue, a prefill worker taking one prompt at a time, a decode worker batching riders."""

    mode = MODE

    def __init__(self, *, max_queue: int = 64, max_new_tokens_cap: int = 4096, max_batch: int = 8, threads: int = 0,
                 start_timeout: float = 600.0):
        self.max_queue, self.max_new_tokens_cap, self.max_batch = max_queue, max_new_tokens_cap, max_batch
        total = threads or os.cpu_count() or 2
        self.threads_per_worker = max(1, total // 2)  # each bend gets its own cores: on 2 cores, one each
        self.start_timeout = start_timeout
        self.session = new_session()  # names this coordinator's KV blocks in shared memory
        self._cond = threading.Condition()
        self._waiting = WaitingQueue(max_queue)  # the Scheduler's line: one QueueFull, one retry hint
        self._works: dict[int, Work] = {}  # sent to a worker and not finished
        self._where: dict[int, str] = {}  # id -> "prefill", "crossing" or "decode"
        self._crossing: dict[int, str] = {}  # id -> the block in shared memory while it crosses
        self._valley_busy = False
        self._stop = False
        self._sides: dict[str, WorkerSide | None] = {PREFILL: None, DECODE: None}
        self.finished = 0
        self.restarts = 0
        self.slices = Slices()  # as the Scheduler's; jobs here are never sliced
        self.timeline: deque[dict] = deque(maxlen=8192)  # every worker step: worker, kind, start, end, ids, ...
        self.handovers: deque[dict] = deque(maxlen=2048)  # every cart: id, bytes, tokens, write/read/crossing seconds
        self._thread = threading.Thread(target=self._loop, name="two-bends-disaggregated", daemon=True)

    # --- consumers' side (any thread) -----------------------------------------------------------------------
    def start(self) -> DisaggregatedScheduler:
        sweep_orphans()  # carts left by a coordinator that was killed (SIGKILL leaves no time to sweep)
        for role in (PREFILL, DECODE):
            self._sides[role] = self._spawn(role)
        self._thread.start()
        return self

    def submit(self, work: Work) -> Work:
        check_request(work, self.max_new_tokens_cap)
        with self._cond:
            self._waiting.add(work, self._works.values(), stopping=self._stop)
            self._cond.notify_all()
        return work

    def cancel(self, work: Work) -> None:
        work.cancel()
        with self._cond:
            if self._waiting.cancel(work, self._works.values()):
                return
            where = self._where.get(work.id)
        side = self._sides[PREFILL if where == PREFILL else DECODE]
        if where is not None and side is not None:
            side.send("cancel", work.id)  # the worker holding it ends it and says so

    def stop(self, timeout: float = 30.0) -> None:
        """Fail what waits, tell both workers to stop (the bridge fails its riders), end them and sweep shared memory."""
        with self._cond:
            self._stop = True
            self._waiting.fail_all("the server is shutting down")
            self._cond.notify_all()
        for side in self._sides.values():
            if side is not None and side.alive():
                side.send("stop", None)
        for side in self._sides.values():
            if side is not None:
                side.end(timeout / 2)
                side.reader.join(timeout / 2)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._fail_where(set(self._works), "the server is shutting down")
        sweep(self.session)

    @property
    def n_waiting(self) -> int:
        return len(self._waiting)

    @property
    def n_running(self) -> int:
        return len(self._works)

    def worker_pids(self) -> dict[str, int | None]:
        return {role: side.pid if side is not None and side.alive() else None for role, side in self._sides.items()}

    # --- the coordinator's thread: hand the next prompt to the valley when it is free and the bridge has room ---
    def _room(self) -> bool:
        riders = sum(1 for where in self._where.values() if where != PREFILL)
        return riders < self.max_batch

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not (self._waiting and not self._valley_busy and self._room()):
                    self._cond.wait(0.5)
                if self._stop:
                    return
                work = self._waiting.popleft()
                self._waiting.announce(self._works.values())
                self._valley_busy = True
                self._works[work.id], self._where[work.id] = work, PREFILL
            try:
                for role in (PREFILL, DECODE):  # a worker that died is replaced before the next request
                    side = self._sides[role]
                    if side is None or not side.alive():
                        if side is not None:
                            side.end(5)
                        self._sides[role] = self._spawn(role)
                        self.restarts += 1
                bridge = self._sides[DECODE]
                if work.model not in bridge.models:  # the bridge loads the model while the valley does (not at a join)
                    bridge.models.add(work.model)
                    bridge.send("load", work.model)
                if not self._sides[PREFILL].send("work", work):
                    raise EngineError(f"{NAMES[PREFILL]} stopped unexpectedly")
            except Exception as exc:
                self._finish(work.id, Failed(str(exc)))
                with self._cond:
                    self._valley_busy = False

    def _spawn(self, role: str) -> WorkerSide:
        options = dict(threads=self.threads_per_worker, session=self.session, max_batch=self.max_batch)
        return WorkerSide(role, options, self._on_message, self._on_exit, self.start_timeout)

    # --- the workers' messages (their reader threads) -------------------------------------------------------
    def _on_message(self, side: WorkerSide, kind: str, key: int, payload) -> None:
        if kind == "event":
            if isinstance(payload, FINAL):
                self._finish(key, payload)
            elif (work := self._works.get(key)) is not None:
                work.emit(payload)
        elif kind == "handover":
            self._cross(key, payload)
        elif kind == "joined":
            with self._cond:
                self._crossing.pop(key, None)
                if key in self._where:
                    self._where[key] = DECODE
            self.handovers.append(payload)
        elif kind == "log":
            self.timeline.append(payload)
        elif kind == "idle":
            with self._cond:
                self._valley_busy = False
                self._cond.notify_all()

    def _cross(self, key: int, carried) -> None:
        """A cart leaves the valley: on to the bridge, unless its request was cancelled or the bridge is down."""
        path = carried.handover.path
        with self._cond:
            work = self._works.get(key)
            if work is not None:
                self._where[key], self._crossing[key] = "crossing", path
        bridge = self._sides[DECODE]
        if work is None or work.cancelled.is_set():
            discard_path(path)
            self._finish(key, Failed("cancelled", cancelled=True))
        elif bridge is None or not bridge.alive() or not bridge.send("join", (work, carried)):
            discard_path(path)
            self._finish(key, Failed(f"{NAMES[DECODE]} is not running; this request failed, the next one starts a new one"))

    def _on_exit(self, side: WorkerSide, why: str) -> None:
        """A worker died: fail what it held (and what was crossing to it), free its carts; the next request restarts it."""
        if self._stop:
            return
        with self._cond:
            held = {k for k, where in self._where.items() if (where == PREFILL) == (side.role == PREFILL)}
            if side.role == PREFILL:
                self._valley_busy = False
            self._cond.notify_all()
        self._fail_where(held, f"{NAMES[side.role]} stopped unexpectedly ({why}); this request failed, "
                               "the next one starts a new worker")

    def _fail_where(self, keys: set[int], message: str) -> None:
        for key in keys:
            discard_path(block_path(self.session, key))  # a cart the dead worker packed but never sent
            self._finish(key, Failed(message))

    def _finish(self, key: int, event) -> None:
        """The final event of a request or job: delivered once, and everything the coordinator held for it let go."""
        with self._cond:
            work = self._works.pop(key, None)
            self._where.pop(key, None)
            path = self._crossing.pop(key, None)
            if work is not None:
                self.finished += 1
                if isinstance(work, Request) and isinstance(event, Done):
                    self._waiting.estimates.learn(event.result)  # the next expected waits
            self._cond.notify_all()
        if path is not None:
            discard_path(path)
        if work is not None:
            work.emit(event)
