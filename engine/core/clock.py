"""One clock for every timing in the project: a timestamp taken only after the device has finished its work.

On CUDA (and MPS) kernels run asynchronously, so a plain `time.perf_counter()` would time the launch,
not the work; synchronising first makes every measured interval the real one.
"""
from __future__ import annotations

import time

import torch


def now(device: torch.device) -> float:
    """perf_counter() once all queued work on `device` is done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    return time.perf_counter()
