"""The engine worker: the scheduler and its models in their own process, for a server with a UI in front.

In a separate process the worker's decode steps never wait for the UI's Python holding the GIL
(docs/decisions/worker-process.md); the UI talks to it through one pipe. `LocalService` runs the same scheduler in a
thread of the calling process instead (tests, the HTTP server, the CLI). Both expose submit / cancel / status and
deliver each work item's events to its own queue. The dashboard's launcher spawns the worker before anything else
(early_start.py): the first ProcessService adopts it.
"""
from __future__ import annotations

import itertools
import os
import sys
import threading
from multiprocessing.connection import Client

from engine.errors import EngineError
from engine.serving.scheduling import early_start, lab_jobs
from engine.serving.scheduling.work import FINAL, Failed, Job, ModelSpec, ServiceOptions, Work, result_of  # noqa: F401

DEFAULT_OPTIONS = ServiceOptions()  # frozen: one shared default


def _make_scheduler(options: ServiceOptions):
    """The scheduler for these options (torch imported here: the dashboard's process, which only talks to the
    worker process, never loads it)."""
    from engine.serving.scheduling.model_pool import ModelPool
    from engine.serving.scheduling.scheduler import Scheduler

    if options.mode == "disaggregated":  # two worker processes, the threads split between them
        from engine.serving.scheduling.disaggregated import DisaggregatedScheduler

        return DisaggregatedScheduler(max_queue=options.max_queue, max_new_tokens_cap=options.max_new_tokens_cap,
                                      max_batch=options.max_batch, threads=options.threads)
    return Scheduler(options.mode, max_queue=options.max_queue, max_new_tokens_cap=options.max_new_tokens_cap,
                     max_batch=options.max_batch, max_num_batched_tokens=options.max_num_batched_tokens,
                     pool=ModelPool(background_kernels=options.prepack_in_background),
                     adaptive_threads=not options.fixed_threads)


class LocalService:
    """The scheduler in a thread of this process."""

    def __init__(self, options: ServiceOptions = DEFAULT_OPTIONS):
        from engine.loading.loader import set_threads  # torch: in this process only when the engine runs here

        self.options = options
        set_threads(options.threads)  # process-wide: in the worker process, or the whole process in thread mode
        self.scheduler = _make_scheduler(options).start()
        if options.preload is not None:  # loaded by the scheduler's thread, the only one that touches its ModelPool
            load = Job(model=options.preload, name=lab_jobs.MODEL_DESCRIBE.name,
                       args=(options.preload,), label=f"loading {options.preload.name}")
            try:
                result_of(self.submit(load))
            except EngineError:
                self.close()
                raise

    def submit(self, work: Work) -> Work:
        return self.scheduler.submit(work)

    def cancel(self, work: Work) -> None:
        self.scheduler.cancel(work)

    def status(self) -> dict:
        return dict(mode=self.options.mode, waiting=self.scheduler.n_waiting, running=self.scheduler.n_running,
                    finished=self.scheduler.finished, pid=os.getpid(),
                    longest_slice_s=self.scheduler.slices.longest)  # a waiting run waits at most one

    def close(self) -> None:
        self.scheduler.stop()


class _PipeSink:
    """Stands in for a work item's event queue inside the worker: every event goes straight to the pipe."""

    def __init__(self, conn, lock: threading.Lock, work_id: int, works: dict):
        self.conn, self.lock, self.work_id, self.works = conn, lock, work_id, works

    def put(self, event) -> None:
        with self.lock:
            self.conn.send(("event", self.work_id, event))
        if isinstance(event, FINAL):
            self.works.pop(self.work_id, None)  # finished: the worker forgets it


def _child_main(conn, options: ServiceOptions) -> None:
    """The worker process: one scheduler, fed through `conn`, reporting events back through it."""
    lock = threading.Lock()
    try:
        service = LocalService(options)
    except EngineError as exc:
        conn.send(("fatal", 0, str(exc)))
        return
    conn.send(("ready", 0, os.getpid()))
    works: dict[int, Work] = {}
    while True:
        try:
            kind, call, payload = conn.recv()
        except (EOFError, OSError):  # the UI process is gone: so is our purpose
            service.close()
            return
        if kind == "submit":
            work = payload
            work.events = _PipeSink(conn, lock, work.id, works)
            works[work.id] = work
            try:
                service.submit(work)
                reply = None
            except EngineError as exc:
                works.pop(work.id, None)
                reply = exc
            with lock:
                conn.send(("reply", call, reply))
        elif kind == "cancel":
            if payload in works:
                service.cancel(works.pop(payload))
        elif kind == "status":
            with lock:
                conn.send(("reply", call, service.status()))
        elif kind == "stop":
            service.close()
            return


class ProcessService:
    """The scheduler in a child process (spawned, so it shares no threads or locks with this one)."""

    def __init__(self, options: ServiceOptions = DEFAULT_OPTIONS, start_timeout: float = 600.0):
        self.options = options
        self._start_timeout = start_timeout
        self._lock = threading.Lock()  # one sender at a time
        self._starting = threading.Lock()  # one (re)start at a time
        self._calls = itertools.count(1)
        self._replies: dict[int, list] = {}
        self._works: dict[int, Work] = {}  # submitted and not finished, by id (one dict per worker process)
        self._proc = None
        self._reader = None
        self._start()

    def _start(self) -> None:
        """Start (or adopt the early-started) `python -m engine.serving.scheduling.worker ADDRESS`, connected
        over a private local socket, and wait until it has loaded its preload model."""
        early = early_start.take_early()
        conn = early_start.adopt(early, self.options) if early is not None else None
        if conn is not None:
            self._proc = early.proc
        else:
            spawned = early_start.spawn()
            self._proc = spawned.proc
            conn = spawned.connection(60)
            if conn is None:
                early_start.end_process(self._proc)
                raise EngineError("the engine worker process did not connect within 60 s")
            conn.send(self.options)
        if not conn.poll(self._start_timeout):
            conn.close()
            early_start.end_process(self._proc)
            raise EngineError(f"the engine worker did not get ready within {self._start_timeout:.0f} s")
        kind, _, payload = conn.recv()
        if kind == "fatal":
            conn.close()
            early_start.end_process(self._proc, wait_s=10)  # it exits by itself after saying why: reap it
            raise EngineError(payload)
        self.pid, self._conn, self._works = payload, conn, {}  # a fresh dict: the old worker's reader drains its own
        self._reader = threading.Thread(target=self._read, args=(conn, self._works, self._proc),
                                        name="two-bends-engine-reader", daemon=True)
        self._reader.start()

    def _read(self, conn, works: dict, proc) -> None:
        """Route every message from the worker: events to their work item, replies to their caller."""
        while True:
            try:
                kind, key, payload = conn.recv()
            except (EOFError, OSError):
                break
            if kind == "event":
                work = works.get(key)
                if work is not None:
                    work.emit(payload)
                    if isinstance(payload, FINAL):
                        works.pop(key, None)
            elif kind == "reply":
                box = self._replies.get(key)
                if box is not None:
                    box.append(payload)
                    box[0].set()
        why = early_start.exit_reason(proc)
        for work in list(works.values()):  # the worker died: nobody will answer these
            work.emit(Failed(f"the engine worker stopped unexpectedly ({why}); run again to start a new one"))
        works.clear()
        for box in list(self._replies.values()):
            box.append(EngineError(f"the engine worker stopped unexpectedly ({why})"))
            box[0].set()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._reader is not None and self._reader.is_alive()

    def _call(self, kind: str, payload, timeout: float = 30.0, work: Work | None = None):
        """Send one call and wait for its reply; an exception in the reply is raised here.

        Only a submission restarts a dead worker (then `work` is registered with the new one before it is
        sent, so its events reach it); status and the like say that the worker is not running."""
        if not self._starting.acquire(timeout=-1 if work is not None else 1.0):  # a status check never waits long
            raise EngineError("the engine worker is starting")
        try:
            if not self.alive():
                if work is None:
                    raise EngineError("the engine worker is not running; the next run starts a new one")
                if self._proc is not None:
                    early_start.end_process(self._proc)  # its link is broken: a new worker replaces it
                self._start()  # restart after a crash: the next request gets a fresh worker
            conn, works = self._conn, self._works
            if work is not None:
                works[work.id] = work
        finally:
            self._starting.release()
        call = next(self._calls)
        box = [threading.Event()]
        self._replies[call] = box
        try:
            try:
                with self._lock:
                    conn.send((kind, call, payload))
            except OSError:
                raise EngineError("the engine worker stopped unexpectedly") from None
            if not box[0].wait(timeout):
                raise EngineError(f"the engine worker did not answer within {timeout:.0f} s")
            reply = box[1]
        except BaseException:
            if work is not None:
                works.pop(work.id, None)
            raise
        finally:
            self._replies.pop(call, None)
        if isinstance(reply, Exception):
            if work is not None:
                works.pop(work.id, None)
            raise reply
        return reply

    def submit(self, work: Work) -> Work:
        self._call("submit", work, work=work)
        return work

    def cancel(self, work: Work) -> None:
        work.cancel()
        if self.alive():
            try:
                with self._lock:
                    self._conn.send(("cancel", 0, work.id))
            except OSError:
                pass  # the worker just died: its reader fails the work

    def status(self) -> dict:
        """The worker's mode and queue; EngineError when it is not running (a status check never restarts it)."""
        return self._call("status", None)

    def close(self) -> None:
        if self.alive():
            try:
                with self._lock:
                    self._conn.send(("stop", 0, None))
            except OSError:
                pass
        if self._proc is not None:
            early_start.end_process(self._proc, wait_s=5)


def make_service(options: ServiceOptions, transport: str = "process"):
    if transport == "thread":
        return LocalService(options)
    if transport == "process":
        return ProcessService(options)
    raise EngineError(f"unknown worker transport '{transport}'; use process or thread")


if __name__ == "__main__":  # the worker process: python -m engine.serving.scheduling.worker ADDRESS [--options-from-env]
    connection = Client(sys.argv[1], family="AF_UNIX", authkey=bytes.fromhex(os.environ.pop("TWO_BENDS_WORKER_KEY")))
    if early_start.FROM_ENV in sys.argv[2:]:  # spawned early by the launcher: its settings are the environment's
        settings = early_start.options_from_env()  # ServiceOptions by its import name: the parent unpickles them
        connection.send(("options", 0, settings))
    else:
        settings = connection.recv()
    _child_main(connection, settings)
