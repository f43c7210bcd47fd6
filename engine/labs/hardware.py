"""This machine's own ceilings, measured: memory-copy bandwidth (decode's floor) and matmul FLOP/s at
the model's shapes (prefill's ceiling). Roofline model: Williams, Waterman, Patterson (2009).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from engine.core.clock import now
from engine.core.config import ModelConfig


@dataclass(frozen=True)
class MeasuredPeaks:
    copy_bytes_per_s: float  # bytes moved (read + written) per second by a large tensor copy
    matmul_flops_per_s: float  # FLOP/s of (T x C) @ (C x F) matmuls at the model's shapes
    device: str
    dtype: str
    read_bytes_per_s: float | None = None  # bytes per second a streaming read reaches (decode's floor), when measured
    memory_bytes: float | None = None  # the device's memory (RAM on a CPU), when known
    measured_at: str = ""  # the wall-clock time of the measurement, for "measured here at ..."


def _best_seconds(fn, device: torch.device, repeats: int, at_least_s: float = 0.0, most: int = 200) -> float:
    """The fastest of `repeats` calls after a warm-up, and of more calls (`most` in all) until they took `at_least_s`:
    a short burst of other programs' work (a page redrawing) then cannot slow every call."""
    fn()  # warm-up
    best, began, calls = float("inf"), time.perf_counter(), 0
    while calls < repeats or (time.perf_counter() - began < at_least_s and calls < most):
        start = now(device)
        fn()
        best = min(best, now(device) - start)
        calls += 1
    return best


def measure_copy_bandwidth(device: torch.device, n_bytes: int = 256 * 2**20, repeats: int = 5,
                           at_least_s: float = 0.0) -> float:
    """Bytes per second for dst.copy_(src) of a tensor much larger than the caches (read + write)."""
    src = torch.ones(n_bytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds = _best_seconds(lambda: dst.copy_(src), device, repeats, at_least_s)
    return 2 * n_bytes / seconds


def measure_read_bandwidth(device: torch.device, n_bytes: int = 256 * 2**20, repeats: int = 5,
                           at_least_s: float = 0.0) -> float:
    """Bytes per second read by a streaming reduction (`x.sum()`) over a tensor much larger than the caches:
    the fastest a decode step could read its weights here."""
    x = torch.ones(n_bytes // 4, dtype=torch.float32, device=device)
    seconds = _best_seconds(lambda: x.sum(), device, repeats, at_least_s)
    return n_bytes / seconds


def step_bytes_reader(model: torch.nn.Module, kv_bytes: int, device: torch.device):
    """A timer (seconds) for torch reading what one decode step reads, in the step's own pieces: every linear layer's
    matrix (the head's too; a tied embedding once) with one `sum()` each, then a KV cache of `kv_bytes` (one buffer).
    Beside the floor's one large read: the same bytes as the step, cut as the step cuts them."""
    seen, matrices = set(), []
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module.weight.data_ptr() not in seen:
            seen.add(module.weight.data_ptr())
            matrices.append(module.weight.detach())
    kv = torch.ones(max(kv_bytes // 4, 1), dtype=torch.float32, device=device)

    def run() -> float:
        start = now(device)
        for m in matrices:
            m.sum()
        kv.sum()
        return now(device) - start

    run.nbytes = sum(m.numel() * m.element_size() for m in matrices) + kv.numel() * 4
    return run


def measure_matmul_flops(device: torch.device, dtype: torch.dtype, cfg: ModelConfig | None = None,
                         tokens: int = 1024, repeats: int = 3, at_least_s: float = 0.0) -> float:
    """FLOP/s of the prefill's biggest matmuls: (tokens x d_model) @ (d_model x d_ff) and back."""
    C = cfg.d_model if cfg else 576
    F = cfg.d_ff if cfg else 1536
    x = torch.randn(tokens, C, dtype=dtype, device=device)
    w_up = torch.randn(C, F, dtype=dtype, device=device)
    w_down = torch.randn(F, C, dtype=dtype, device=device)
    h = torch.empty(tokens, F, dtype=dtype, device=device)
    y = torch.empty(tokens, C, dtype=dtype, device=device)

    def run():
        torch.mm(x, w_up, out=h)
        torch.mm(h, w_down, out=y)

    seconds = _best_seconds(run, device, repeats, at_least_s)
    return 2 * 2 * tokens * C * F / seconds


def memory_bytes(device: torch.device) -> float | None:
    """The device's whole memory: the GPU's on CUDA, physical RAM elsewhere (None when the OS does not say)."""
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


# each of the peaks' probes repeats for at least this long (the fastest call counts), so that a short burst of other
# programs' work does not decide it; a page that starts the probe as it opens first waits for quiet cores
# (ui/engine_link/job_progress.py; what both bought: docs/decisions/page-disturbance.md)
PROBE_S = 0.3


def measure_peaks(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                  cfg: ModelConfig | None = None, at_least_s: float = PROBE_S) -> MeasuredPeaks:
    device = torch.device(device)
    return MeasuredPeaks(measure_copy_bandwidth(device, at_least_s=at_least_s),
                         measure_matmul_flops(device, dtype, cfg, at_least_s=at_least_s),
                         device.type, str(dtype).removeprefix("torch."), measure_read_bandwidth(device, at_least_s=at_least_s),
                         memory_bytes(device), time.strftime("%H:%M:%S"))


def card_of(peaks: MeasuredPeaks):
    """This machine as a card of the card model (engine/perfmodel/cards.py): the peaks measured here, and when."""
    from engine.perfmodel.cards import measured_card

    read = peaks.read_bytes_per_s or peaks.copy_bytes_per_s / 2  # a copy reads and writes each byte
    return measured_card(peaks.matmul_flops_per_s, read, peaks.memory_bytes or 0.0,
                         f"at {peaks.measured_at}" if peaks.measured_at else "in this session", peaks.device)


def peaks_of(lm) -> MeasuredPeaks:
    """The peaks of the device and dtype `lm` runs in (a Job target: measured where the model lives)."""
    return measure_peaks(lm.device, lm.dtype, lm.config)
