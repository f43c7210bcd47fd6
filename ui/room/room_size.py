"""How many students this machine holds, for the teacher console: measured here, or an estimate labelled as one.

`python -m benchmarks.room_size` measures it (a class in real browsers against the README's command) and saves the
result as room_size.json in the user's data folder (ui/room/store.default_dir), never in the checkout. A result from
another host (the folder copied or shared) is not this machine's and is not used. Without one, the console shows an
estimate from a server-CPU-per-student model, with the per-student costs measured on another machine and said so.
Streamlit-free: the console (ui/room/console.py) draws the line this module words.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import socket
import time
from pathlib import Path

from ui.room import store

FILE_NAME = "room_size.json"
VERSION = 1
NEAR = 0.8  # the console warns from this share of the measured size on

# The estimate's per-student costs: what benchmarks.room_size measured for the server (Streamlit process + engine
# worker, read from /proc) on a 2-vCPU cloud VM (AMD EPYC) with SmolLM2-135M, 2026-12-05, an 8-student queue-mode room
# while other users' jobs held the machine (load average 9-12): a recording from another machine, and a busy one. The
# console says so whenever it uses them.
ESTIMATE_SOURCE = "a busy 2-vCPU cloud VM, 2026-12-05"
IDLE_CPU_PER_STUDENT = 0.002  # CPU seconds per second one joined, idle student cost the server (0.0018 measured)
CPU_PER_RUN = 3.3  # CPU seconds the server spent per student's default run: Streamlit 0.51 + the worker 2.74
ENGINE_S_PER_RUN = 3.0  # wall seconds one default run held the engine in queue mode (TPOT 96 ms x 31 + TTFT)
BUSY_SHARE = 0.7  # the share of the cores the estimate lets a class use (the rest: the teacher's own screen)


@dataclasses.dataclass(frozen=True)
class Size:
    """Students the machine holds per mode; `source` says where the numbers come from, in words."""
    queue: int
    batch: int | None
    source: str
    measured: bool
    at_least: bool = False  # every room size the benchmark tried held: the machine may hold more


def path(env=None) -> Path:
    return store.default_dir(env) / FILE_NAME


def new_result(host: str, cpus: int, model: str, within_s: float) -> dict:
    return dict(version=VERSION, host=host, cpus=cpus, model=model, within_s=within_s,
                measured_at=time.strftime("%Y-%m-%d %H:%M"), modes={})


def save(result: dict, env=None) -> Path:
    target = path(env)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    target.write_text(json.dumps(result, indent=1))
    return target


def load(env=None, host: str | None = None) -> dict | None:
    """This host's saved measurement; None when there is none, it is unreadable or another host's."""
    try:
        result = json.loads(path(env).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("version") != VERSION or "queue" not in result.get("modes", {}):
        return None
    return result if result.get("host") == (host or socket.gethostname()) else None


def estimate(cpus: int, window_s: float = 60.0, within_s: float = 60.0) -> Size:
    """The server-CPU-per-student model: every student presses Run once within `window_s` and sits idle otherwise;
    the class may use BUSY_SHARE of the cores, and in queue mode each run also waits for the runs ahead of it
    (ENGINE_S_PER_RUN each) and must finish within `within_s`. Batch mode is not estimated (its cost per student
    depends on how runs share steps): None."""
    per_student = CPU_PER_RUN + IDLE_CPU_PER_STUDENT * window_s
    by_cpu = math.floor(cpus * window_s * BUSY_SHARE / per_student)
    by_queue = math.floor(within_s / ENGINE_S_PER_RUN)
    return Size(queue=max(1, min(by_cpu, by_queue)), batch=None, measured=False,
                source=f"an estimate for {cpus} cores from the server's CPU per student measured on {ESTIMATE_SOURCE} "
                       f"with SmolLM2-135M's default run, each student pressing Run once in {window_s:.0f} s, the class "
                       f"using {BUSY_SHARE:.0%} of the cores (run `python -m benchmarks.room_size` to measure this machine)")


def measured(result: dict) -> Size:
    modes = result["modes"]
    batch = modes.get("batch", {}).get("students")
    at_least = modes["queue"].get("every_size_held", False)
    return Size(queue=modes["queue"]["students"], batch=batch, measured=True, at_least=at_least,
                source=f"measured by `python -m benchmarks.room_size` on {result['measured_at']} on this host "
                       f"(every run finished within {result['within_s']:.0f} s, no blank tab; the browsers ran on "
                       "the same machine, a harder room than a real one)")


def current(env=None) -> Size:
    result = load(env)
    return measured(result) if result else estimate(os.cpu_count() or 1)


def line(size: Size, students: int, mode: str) -> tuple[str, str]:
    """(level, words) for the console: "info" below NEAR of the size in the room's mode, "warning" near it, "error"
    past it (with the advice to move the runs to a serving engine)."""
    if size.queue == 0:
        return "warning", (f"This machine did not hold the smallest room measured in queue mode; you have {students} "
                           f"({size.source}). Consider moving the room's runs to a serving engine (`--engine-url URL`, "
                           "docs/serving.md).")
    more = "at least " if size.at_least else "about "
    batch = f"{more}{size.batch} in batch mode" if size.batch is not None else "batch mode not measured"
    words = (f"This machine holds {more}{size.queue} students in queue mode, {batch}; you have {students} "
             f"({size.source}).")
    held = size.batch if mode == "batch" and size.batch is not None else size.queue
    if held and students > held and size.at_least:
        return "warning", (words + f" The room is larger than any room measured in {mode} mode: watch the queue "
                           "waits above; if they grow, move the room's runs to a serving engine (`--engine-url URL`, "
                           "docs/serving.md).")
    if held and students > held and not size.at_least:
        return "error", (words + f" The room is past what this machine held in {mode} mode: runs will wait longer "
                         "than the measured bound. Move the room's runs to a serving engine: restart with "
                         "`--engine-url URL` (docs/serving.md).")
    if held and students >= NEAR * held and not size.at_least:
        return "warning", (words + " The room is near that size: if it grows, move the room's runs to a serving "
                           "engine (`--engine-url URL`, docs/serving.md).")
    return "info", words
