"""One worker process of disaggregated serving as its coordinator sees it: started, connected, read, ended.

The coordinator (engine/serving/scheduling/disaggregated.py) keeps one WorkerSide per bend: it starts
`python -m engine.serving.scheduling.disaggregated_workers ADDRESS ROLE` with a fresh key (early_start.spawn, as the
engine worker is started), waits for the child to connect and say it is ready, then a reader thread hands every
message to the coordinator and, when the pipe closes, says why the process ended (exit code or signal).
"""
from __future__ import annotations

import threading

from engine.errors import EngineError
from engine.serving.scheduling.early_start import end_process, exit_reason, spawn

PREFILL, DECODE = "prefill", "decode"
NAMES = {PREFILL: "the prefill worker (the valley)", DECODE: "the decode worker (the bridge)"}


class WorkerSide:
    """One worker process seen from the coordinator: its process, its pipe and the thread reading it."""

    def __init__(self, role: str, options: dict, on_message, on_exit, start_timeout: float):
        self.role, self.dead = role, False
        self.models: set = set()  # model specs this worker was told to load
        self.lock = threading.Lock()
        spawned = spawn(role, module="engine.serving.scheduling.disaggregated_workers")
        self.proc = spawned.proc
        self.conn = spawned.connection(60)
        if self.conn is None:
            self.end(0)
            raise EngineError(f"{NAMES[role]} did not connect within 60 s")
        self.conn.send(options)
        if not self.conn.poll(start_timeout):
            self.conn.close()
            self.end(0)
            raise EngineError(f"{NAMES[role]} did not get ready within {start_timeout:.0f} s")
        _, _, self.pid = self.conn.recv()
        self.reader = threading.Thread(target=self._read, args=(on_message, on_exit), name=f"two-bends-{role}-reader",
                                       daemon=True)
        self.reader.start()

    def _read(self, on_message, on_exit) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            except Exception:  # a message that does not unpickle is lost; the pipe itself still works
                continue
            on_message(self, *message)
        why = exit_reason(self.proc)
        self.dead = True
        on_exit(self, why)

    def alive(self) -> bool:
        return not self.dead and self.proc.poll() is None

    def send(self, kind: str, payload) -> bool:
        try:
            with self.lock:
                self.conn.send((kind, payload))
            return True
        except OSError:
            return False

    def end(self, wait_s: float) -> None:
        end_process(self.proc, wait_s)
