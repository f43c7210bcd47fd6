"""Freed memory goes back to the OS when the engine is idle (engine/serving/scheduling/os_memory.py)."""
import subprocess
import sys
import threading
import time

import pytest

import engine
from engine.serving.scheduling import os_memory
from engine.serving.scheduling import scheduler as scheduler_module
from engine.serving.scheduling.scheduler import Scheduler
from engine.serving.scheduling.work import ModelSpec, Request, result_of
from tests import ROOT

# In a fresh process: raise glibc's mmap threshold the way a freed long-prompt tensor does, allocate and free
# 180 MB of 3 MB tensors under a pinned heap top, and print RSS (MiB) after the free and after release.
HEAP_PATTERN = """
import torch
from engine.serving.scheduling.os_memory import release_free_memory
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
big = torch.ones(20 * 2**20 // 4); del big
xs = [torch.ones(3 * 2**20 // 4) for _ in range(60)]
pin = [torch.ones(3 * 2**20 // 4) for _ in range(2)]
del xs
freed = rss()
print(release_free_memory(), freed, rss())
"""


def test_release_returns_freed_heap_pages_to_the_os():
    if not os_memory.release_free_memory():
        pytest.skip("not glibc: nothing to trim")
    out = subprocess.run([sys.executable, "-c", HEAP_PATTERN], capture_output=True, text=True, check=True, cwd=ROOT)
    ran, freed_mib, released_mib = out.stdout.split()
    assert ran == "True"
    assert float(freed_mib) - float(released_mib) > 100, out.stdout  # ~180 MB were free but still resident


def _requests(s: Scheduler, gaps: list[float]) -> None:
    spec = ModelSpec("tiny-llama", "cpu")
    for gap in gaps:
        result_of(s.submit(Request(model=spec, prompt_ids=[1, 2, 3], max_new_tokens=4,
                                   params=engine.SamplingParams(ignore_eos=True))), timeout=120)
        time.sleep(gap)


def test_the_scheduler_releases_memory_once_when_it_goes_idle(monkeypatch):
    calls = []  # (thread, when): a scheduler another test left running in this process calls the same function
    monkeypatch.setattr(scheduler_module, "release_free_memory",
                        lambda: calls.append((threading.current_thread(), time.perf_counter())))
    monkeypatch.setattr(scheduler_module, "TRIM_AFTER_S", 0.3)
    s = Scheduler("queue").start()
    try:
        _requests(s, [1.2, 1.2])  # idle: longer than TRIM_AFTER_S and than one of the scheduler's 0.5 s waits
        mine = [when for thread, when in calls if thread is s._thread]
        assert len(mine) == 2  # once after each request, not on every idle wake-up
    finally:
        s.stop()


def test_requests_close_together_keep_the_memory_the_last_one_freed(monkeypatch):
    """Handed back after every request, the next request's KV cache was page-faulted in again before its prefill
    (4.4 ms of a 128-token request, inside the client's TTFT): only an idle spell of TRIM_AFTER_S hands it back."""
    calls = []
    monkeypatch.setattr(scheduler_module, "release_free_memory", lambda: calls.append(time.perf_counter()))
    monkeypatch.setattr(scheduler_module, "TRIM_AFTER_S", 1.5)
    s = Scheduler("queue").start()
    try:
        _requests(s, [0.6, 0.6, 0.6])  # each gap longer than one 0.5 s wait, shorter than TRIM_AFTER_S
        assert calls == []
        time.sleep(2.0)
        assert len(calls) == 1  # the idle spell after the last one
    finally:
        s.stop()
