"""Starting and stopping the processes the benchmarks measure: each in a session of its own, always stopped."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
