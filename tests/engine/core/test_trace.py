"""engine/core/trace.py's environment(): the CPU's name is read from /proc/cpuinfo once per process, with the file
closed, not opened anew (and left open) on every trace."""
import builtins
import os

import pytest
import torch

from engine.core import trace as trace_module


def forget_cpu_name() -> None:
    """Empty the per-process cache, so the test sees the file being read."""
    cached = getattr(trace_module, "cpu_name", None)
    if cached is not None:
        cached.cache_clear()


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="Linux only")
def test_cpuinfo_is_read_once_and_closed(monkeypatch):
    opened = []
    real_open = builtins.open

    def tracking_open(file, *args, **kwargs):
        handle = real_open(file, *args, **kwargs)
        if str(file) == "/proc/cpuinfo":
            opened.append(handle)
        return handle

    monkeypatch.setattr(builtins, "open", tracking_open)
    forget_cpu_name()
    names = {trace_module.environment(torch.device("cpu"))["device_name"] for _ in range(5)}
    assert len(opened) == 1 and opened[0].closed
    assert len(names) == 1 and names.pop()


def test_no_cpuinfo_means_the_name_cpu(monkeypatch):
    def missing(file, *args, **kwargs):
        raise FileNotFoundError(file)

    forget_cpu_name()
    monkeypatch.setattr(builtins, "open", missing)
    try:
        assert trace_module.environment(torch.device("cpu"))["device_name"] == "CPU"
    finally:
        forget_cpu_name()  # the next test reads the real file again
