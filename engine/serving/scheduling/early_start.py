"""Start the engine worker's process first, so its imports and model load run beside the UI's own start-up.

The launcher calls `start_early()` before it imports anything heavy (docs/decisions/fast-start.md): the child builds
its settings from the same environment variables the dashboard reads (options_from_env, below) and starts loading at
once. The first ProcessService (worker.py) adopts that child when its settings are the ones it wanted, and starts a
fresh one otherwise. Standard library only, on purpose: importing this costs nothing.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Listener
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the project folder, so the child imports this engine
FROM_ENV = "--options-from-env"  # the child builds its ServiceOptions from the environment and sends them back


@dataclass
class Spawned:
    """A worker process just started, and the private socket it will connect to."""
    proc: subprocess.Popen
    listener: Listener
    accepted: list = field(default_factory=list)
    thread: threading.Thread | None = None

    def connection(self, timeout: float):
        """The child's connection once it connected (None after `timeout` s); the listener is closed either way."""
        self.thread.join(timeout)
        self.listener.close()
        return self.accepted[0] if self.accepted else None


def spawn(*extra: str, module: str = "engine.serving.scheduling.worker") -> Spawned:
    """Start `python -m MODULE ADDRESS [extra]` (the engine worker, or a worker of disaggregated serving); it connects
    back with a one-time key.

    A plain subprocess, not multiprocessing's spawn: that would re-import the caller's main script
    (Streamlit's, pytest's) in the child."""
    key = os.urandom(32)
    listener = Listener(family="AF_UNIX", authkey=key)
    env = dict(os.environ, TWO_BENDS_WORKER_KEY=key.hex())
    proc = subprocess.Popen([sys.executable, "-m", module, listener.address, *extra], cwd=ROOT, env=env)
    spawned = Spawned(proc, listener)

    def accept() -> None:
        try:
            spawned.accepted.append(listener.accept())
        except OSError:  # closed before the child connected (it died, or nobody waited for it)
            pass

    spawned.thread = threading.Thread(target=accept, name="two-bends-worker-accept", daemon=True)
    spawned.thread.start()
    return spawned


_early: Spawned | None = None
_lock = threading.Lock()


def start_early() -> None:
    """Spawn the worker now (once per process), loading the model the environment names; see the module docstring."""
    global _early
    with _lock:
        if _early is None:
            _early = spawn(FROM_ENV)


def take_early() -> Spawned | None:
    """The worker start_early spawned, handed over once (None when there is none, or it was taken)."""
    global _early
    with _lock:
        spawned, _early = _early, None
    return spawned


def adopt(early: Spawned, wanted) -> object | None:
    """The early worker's connection when it runs the ServiceOptions `wanted`; else it is ended and None returned
    (the caller starts a fresh worker)."""
    conn = early.connection(60)
    theirs = None
    if conn is not None and conn.poll(60):
        try:
            kind, _, theirs = conn.recv()  # ("options", 0, ServiceOptions), sent as soon as it connected
        except Exception:  # gone (EOFError, OSError), or options this process cannot read: start a fresh one
            theirs = None
    if theirs == wanted:
        return conn
    if conn is not None:
        conn.close()
    end_process(early.proc)
    return None


def end_process(proc: subprocess.Popen, wait_s: float = 0.0) -> None:
    """Make sure a worker process is gone and reaped (no zombie left behind): wait up to wait_s, then kill."""
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def exit_reason(proc: subprocess.Popen) -> str:
    """How a worker whose pipe closed ended, reaping it: its exit code or signal, or that it still runs, mute."""
    try:
        code = proc.wait(5)
    except subprocess.TimeoutExpired:
        return "it no longer answers"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def int_env(name: str, default: int, env=os.environ) -> int:
    try:
        return int(env.get(name, default))
    except ValueError:
        return default


def budget_env(env=os.environ) -> int | str | None:
    """Batch mode's token budget per step; unset = whole prefills; a bad value goes on to the scheduler's one-line error."""
    raw = env.get("TWO_BENDS_MAX_NUM_BATCHED_TOKENS", "").strip()
    return None if not raw else int(raw) if raw.lstrip("-").isdigit() else raw


def options_from_env(env=os.environ, prepack_in_background: bool = True):
    """The dashboard's worker settings (work.ServiceOptions) from the environment variables two_bends_cli.py's
    `dashboard` sets: the one place they are read (ui/engine_link/server_link.options() calls it), readable without
    Streamlit, so the early worker can start loading before the UI asks; that one prepacks its kernels in the
    background."""
    from engine.loading.model_store import DEFAULT_MODEL
    from engine.serving.scheduling.work import ModelSpec, ServiceOptions

    model = env.get("TWO_BENDS_MODEL", DEFAULT_MODEL)
    return ServiceOptions(mode=env.get("TWO_BENDS_MODE", "queue"), max_queue=int_env("TWO_BENDS_MAX_QUEUE", 64, env),
                          max_new_tokens_cap=int_env("TWO_BENDS_MAX_NEW_TOKENS", 4096, env),
                          max_batch=int_env("TWO_BENDS_MAX_BATCH", 8, env),
                          threads=max(0, int_env("TWO_BENDS_THREADS", 0, env)),
                          fixed_threads=env.get("TWO_BENDS_FIXED_THREADS", "") == "1",
                          preload=ModelSpec(model, "auto", "float32"), max_num_batched_tokens=budget_env(env),
                          prepack_in_background=prepack_in_background)
