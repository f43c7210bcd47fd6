"""The processes the benchmarks measure: started in a session of their own, their CPU time read (ready by /health,
stopped, and their descendants found by tests/browser/appdriver.py's helpers, which the browser tests share)."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.browser.appdriver import ServerDidNotStart, start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serve(args: list[str], log: Path, cwd: Path = ROOT, env: dict | None = None, timeout: float = 300.0):
    """`python -m engine serve ARGS` run from `cwd`, entered once it printed its 'serving' line (its HTTP stack
    warm), stopped on leaving; exits with the end of its log when it stops first or stays silent for `timeout` seconds."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", *args], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if any(line.startswith("serving") for line in log.read_text(errors="replace").splitlines()):
            break
        time.sleep(0.1)
    else:
        stop_server(proc)
        sys.exit(f"engine serve did not start; the end of its log {log}:\n{log.read_text(errors='replace')[-2000:]}")
    try:
        yield proc
    finally:
        stop_server(proc)


@contextlib.contextmanager
def started(name: str, cmd: list[str], port: int, log: Path, timeout: float, env: dict):
    """appdriver.start_server's server (ours or vLLM, entered once its /health answers), stopped on leaving; exits
    saying which server did not start and where its log is."""
    try:
        proc = start_server(cmd, port, log, timeout, env)
    except ServerDidNotStart as exc:
        sys.exit(f"{name} did not start: {exc} (see {log})")
    try:
        yield proc
    finally:
        stop_server(proc)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) one process has used so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15 of stat)
    except (OSError, IndexError, ValueError):
        return 0.0


def schedstat() -> dict[str, tuple[int, int]]:
    """Thread id -> (ns on a CPU, ns runnable without one) for this process's threads (Linux; empty elsewhere)."""
    out = {}
    for task in Path("/proc/self/task").glob("*"):
        try:
            fields = (task / "schedstat").read_text().split()
            out[task.name] = (int(fields[0]), int(fields[1]))
        except (OSError, IndexError, ValueError):
            continue
    return out
