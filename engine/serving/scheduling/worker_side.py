"""One worker process of disaggregated serving as its coordinator sees it: started, connected, read, ended.

The coordinator (engine/serving/scheduling/disaggregated.py) keeps one WorkerSide per bend: it starts
`python -m engine.serving.scheduling.disaggregated_workers ROLE ADDRESS` with a fresh key, waits for the child to
connect and say it is ready, then a reader thread hands every message to the coordinator and, when the pipe
closes, says why the process ended (exit code or signal).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from multiprocessing.connection import Listener
from pathlib import Path

from engine.errors import EngineError

PREFILL, DECODE = "prefill", "decode"
NAMES = {PREFILL: "the prefill worker (the valley)", DECODE: "the decode worker (the bridge)"}


class WorkerSide:
    """One worker process seen from the coordinator: its process, its pipe and the thread reading it."""

    def __init__(self, role: str, options: dict, on_message, on_exit, start_timeout: float):
        self.role, self.dead = role, False
        self.models: set = set()  # model specs this worker was told to load
        self.lock = threading.Lock()
        key = os.urandom(32)
        listener = Listener(family="AF_UNIX", authkey=key)
        root = Path(__file__).resolve().parents[3]  # the project folder, so the child imports this engine
        env = dict(os.environ, TWO_BENDS_WORKER_KEY=key.hex())
        self.proc = subprocess.Popen([sys.executable, "-m", "engine.serving.scheduling.disaggregated_workers", role,
                                      listener.address], cwd=root, env=env)
        accepted: list = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        thread.start()
        thread.join(60)
        listener.close()
        if not accepted:
            self.end(0)
            raise EngineError(f"{NAMES[role]} did not connect within 60 s")
        self.conn = accepted[0]
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
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        why = "it no longer answers" if code is None else f"killed by signal {-code}" if code < 0 else f"exit code {code}"
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
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
