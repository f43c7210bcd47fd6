"""The processes the benchmarks measure: started in a session of their own, always stopped, their CPU time read."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def serve(args: list[str], log: Path, cwd: Path = ROOT, env: dict | None = None, timeout: float = 300.0):
    """`python -m engine serve ARGS` run from `cwd`, returned once it printed its 'serving' line (its HTTP stack
    warm); exits with the end of its log when it stops first or stays silent for `timeout` seconds."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", *args], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if any(line.startswith("serving") for line in log.read_text(errors="replace").splitlines()):
            return proc
        time.sleep(0.1)
    stop(proc)
    sys.exit(f"engine serve did not start; the end of its log {log}:\n{log.read_text(errors='replace')[-2000:]}")


def stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) one process has used so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15 of stat)
    except (OSError, IndexError, ValueError):
        return 0.0


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: the children of each of its threads, theirs, and so on."""
    found, todo = [], [pid]
    while todo:
        try:
            kids = [int(c) for t in Path(f"/proc/{todo.pop()}/task").iterdir() for c in (t / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        found += kids
        todo += kids
    return found


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
